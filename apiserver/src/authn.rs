//! Authentication: who presents a bearer token. The admin token
//! (`DIR/token`) is the kubeconfig's user in group `system:masters`; the
//! `--token-auth-file` holds more users in kube-apiserver's format, one CSV
//! line each:
//!
//! ```text
//! # token,user,uid,"group1,group2"
//! 31ada4fd-adec-460c-809a-9e56ceb75269,team-a,team-a,"mpiswarm:tenants"
//! ```
//!
//! Every user gets group `system:authenticated` too. The file is watched:
//! re-read when its modification time, size or inode changes (looked at
//! once a second, with `tokio::fs`, so on the blocking pool and never under
//! a lock), and the new users replace the old ones in one swap, so a tenant
//! added to (or removed from) a running server counts within seconds. A
//! file that no longer parses keeps the users of its last good version
//! (and the error is logged, naming the line): a typo must not lock every
//! tenant out. A file that is gone grants nothing until it is back.
//!
//! Tokens are compared in constant time, each presented token against
//! every known one. Nothing here decides what a user may do (`rbac`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use crate::locks;
use crate::rbac::{AUTHENTICATED, MASTERS, User};

/// How often the token file is looked at.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// What is wrong with one line of a token file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("token auth file {0}: {1}")]
    Read(String, #[source] std::io::Error),
    #[error("token auth file {0}: {1}; the format is one user per line: token,user,uid,\"group1,group2\"")]
    Parse(String, #[source] LineError),
}

/// One user of the token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    pub token: String,
    pub user: Arc<User>,
}

/// The fields of one CSV line: quoted fields may hold commas, and `""`
/// inside quotes is one quote, as Go's `encoding/csv` reads them.
fn fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        let mut field = String::new();
        if chars.next_if_eq(&'"').is_some() {
            loop {
                match chars.next() {
                    None => {
                        return Err(format!(
                            "column {} opens a quote that the line does not close (a quoted field must end on its line)",
                            out.len() + 1
                        ));
                    }
                    Some('"') if chars.next_if_eq(&'"').is_some() => field.push('"'),
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
            match chars.next() {
                None => {
                    out.push(field);
                    return Ok(out);
                }
                Some(',') => out.push(field),
                Some(c) => return Err(format!("column {} has {c:?} after its closing quote", out.len() + 1)),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        out.push(field.trim().to_owned());
                        return Ok(out);
                    }
                    Some(',') => break,
                    Some('"') => {
                        return Err(format!(
                            "column {} has a quote inside an unquoted value; quote the whole value",
                            out.len() + 1
                        ));
                    }
                    Some(c) => field.push(c),
                }
            }
            out.push(field.trim().to_owned());
        }
    }
}

/// Parse a token file. Blank lines and lines starting with `#` are skipped;
/// any other line must be `token,user,uid` with an optional fourth column of
/// comma-separated groups (quoted when there are several). An empty token
/// or user, a token given twice, or more than four columns is an error that
/// names the line.
pub fn parse(text: &str) -> Result<Vec<TokenUser>, LineError> {
    let mut users: Vec<TokenUser> = Vec::new();
    let mut lines_of: Vec<usize> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let bad = |message: String| LineError { line, message };
        let cols = fields(trimmed).map_err(bad)?;
        if cols.len() < 3 {
            return Err(bad(format!(
                "{} column(s), but a line needs at least 3 (token, user name, user uid)",
                cols.len()
            )));
        }
        if cols.len() > 4 {
            return Err(bad(format!(
                "{} columns, but a line has at most 4 (token, user name, user uid, groups); several groups go in one quoted column: \"group1,group2\"",
                cols.len()
            )));
        }
        let token = cols[0].clone();
        if token.is_empty() {
            return Err(bad("the token (column 1) is empty".into()));
        }
        if token.chars().any(char::is_whitespace) {
            return Err(bad("the token (column 1) contains white space".into()));
        }
        if cols[1].is_empty() {
            return Err(bad("the user name (column 2) is empty".into()));
        }
        if let Some(first) = users.iter().position(|u| u.token == token) {
            let other = lines_of.get(first).copied().unwrap_or_default();
            return Err(bad(format!("the token of line {other} again; every user needs a token of its own")));
        }
        let mut groups: Vec<String> = cols
            .get(3)
            .map(|g| g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(String::from).collect())
            .unwrap_or_default();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        users.push(TokenUser { token, user: Arc::new(User { name: cols[1].clone(), uid: cols[2].clone(), groups }) });
        lines_of.push(line);
    }
    Ok(users)
}

/// What identifies one version of the file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self { modified: m.modified().ok(), len: m.len(), inode: m.ino() }
    }
}

/// The users of `--token-auth-file`, as last read.
pub struct TokenFile {
    path: PathBuf,
    users: RwLock<Arc<Vec<TokenUser>>>,
}

impl TokenFile {
    /// Reads the file once, at start-up: an unreadable file or a malformed
    /// line is an error. Also returns the stamp `watch` starts from.
    pub fn load(path: &Path) -> Result<(Self, Option<Stamp>), Error> {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| Error::Read(shown.clone(), e))?;
        let text = std::fs::read_to_string(path).map_err(|e| Error::Read(shown.clone(), e))?;
        let users = parse(&text).map_err(|e| Error::Parse(shown, e))?;
        let file = Self { path: path.to_owned(), users: RwLock::new(Arc::new(users)) };
        Ok((file, Some(Stamp::of(&meta))))
    }

    pub fn users(&self) -> Arc<Vec<TokenUser>> {
        locks::read(&self.users).clone()
    }

    fn replace(&self, users: Vec<TokenUser>) {
        *locks::write(&self.users) = Arc::new(users);
    }

    /// Looks at the file once: if it changed since `seen`, reads it and
    /// swaps in its users. Returns what was seen now.
    pub async fn refresh(&self, seen: Option<Stamp>) -> Option<Stamp> {
        let shown = self.path.display();
        let meta = match tokio::fs::metadata(&self.path).await {
            Ok(m) => m,
            Err(e) => {
                if seen.is_some() {
                    tracing::error!(path = %shown, error = %e, "the token auth file cannot be read; its users are refused until it is back");
                    self.replace(Vec::new());
                }
                return None;
            }
        };
        let now = Stamp::of(&meta);
        if seen == Some(now) {
            return seen;
        }
        let parsed = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(|e| e.to_string())
            .and_then(|text| parse(&text).map_err(|e| e.to_string()));
        match parsed {
            Ok(users) => {
                tracing::info!(path = %shown, users = users.len(), "token auth file read");
                self.replace(users);
            }
            Err(e) => {
                tracing::error!(path = %shown, error = %e, "the token auth file changed but cannot be used; the users of its last good version stay");
            }
        }
        Some(now)
    }

    /// Re-reads the file whenever it changes, forever (a server task).
    pub async fn watch(self: Arc<Self>, mut seen: Option<Stamp>) {
        let mut tick = tokio::time::interval(RELOAD_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            seen = self.refresh(seen).await;
        }
    }
}

/// Who holds which token.
pub struct Authenticator {
    admin_token: String,
    admin: Arc<User>,
    file: Option<Arc<TokenFile>>,
}

impl Authenticator {
    pub fn new(admin_token: String, file: Option<Arc<TokenFile>>) -> Self {
        let admin = Arc::new(User {
            name: crate::tls::KUBECONFIG_USER.to_owned(),
            uid: String::new(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
        });
        Self { admin_token, admin, file }
    }

    /// The user whose token this is. Every known token is compared, in
    /// constant time each, whether or not an earlier one matched.
    pub fn authenticate(&self, presented: &str) -> Option<Arc<User>> {
        let mut found = None;
        if mpiswarm_guard::secret_eq(presented, &self.admin_token) {
            found = Some(self.admin.clone());
        }
        if let Some(file) = &self.file {
            for u in file.users().iter() {
                if mpiswarm_guard::secret_eq(presented, &u.token) && found.is_none() {
                    found = Some(u.user.clone());
                }
            }
        }
        found
    }

    /// The user of a request's `Authorization: Bearer` header.
    pub fn bearer(&self, authorization: &str) -> Option<Arc<User>> {
        let token = authorization.strip_prefix("Bearer ")?.trim();
        if token.is_empty() { None } else { self.authenticate(token) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(users: &[TokenUser]) -> Vec<(&str, &str, &str, Vec<&str>)> {
        users
            .iter()
            .map(|u| {
                (
                    u.token.as_str(),
                    u.user.name.as_str(),
                    u.user.uid.as_str(),
                    u.user.groups.iter().map(String::as_str).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn lines_are_token_user_uid_and_optional_groups_quoted_when_several() {
        let text = "# tenants\n\ntok-a,team-a,uid-a,\"mpiswarm:tenants, team-a-admins\"\n  tok-b , team-b , uid-b \ntok-c,ci,uid-c,builders\n   # indented comment\ntok-d,\"o\"\"brien\",,\"\"\n";
        let users = parse(text).expect("parses");
        assert_eq!(
            names(&users),
            [
                ("tok-a", "team-a", "uid-a", vec!["mpiswarm:tenants", "team-a-admins", AUTHENTICATED]),
                ("tok-b", "team-b", "uid-b", vec![AUTHENTICATED]),
                ("tok-c", "ci", "uid-c", vec!["builders", AUTHENTICATED]),
                ("tok-d", "o\"brien", "", vec![AUTHENTICATED]),
            ]
        );
    }

    #[test]
    fn a_malformed_line_is_refused_with_its_number_and_what_is_wrong() {
        let cases = [
            ("ok,u,1\ntok,user\n", 2, "2 column(s), but a line needs at least 3"),
            ("\n\n,user,uid\n", 3, "the token (column 1) is empty"),
            ("  ,user,uid\n", 1, "the token (column 1) is empty"),
            ("tok,,uid\n", 1, "the user name (column 2) is empty"),
            ("tok,u,1,g1,g2\n", 1, "several groups go in one quoted column"),
            ("tok,u,1,\"g1,g2\n", 1, "opens a quote that the line does not close"),
            ("tok,u,1,\"g1\"x\n", 1, "has 'x' after its closing quote"),
            ("tok,u\"x,1\n", 1, "quote inside an unquoted value"),
            ("tok,u,1\n# c\ntok,v,2\n", 3, "the token of line 1 again"),
            ("to k,u,1\n", 1, "contains white space"),
        ];
        for (text, line, message) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(message), "{text:?}: {e}");
        }
        assert!(parse("# only comments\n\n").expect("empty is fine").is_empty());
    }

    #[test]
    fn the_admin_token_is_system_masters_and_file_tokens_are_their_users() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "tok-a,team-a,a\n").expect("write");
        let (file, _) = TokenFile::load(&path).expect("loads");
        let auth = Authenticator::new("admin-secret".into(), Some(Arc::new(file)));
        let admin = auth.bearer("Bearer admin-secret").expect("admin");
        assert!(admin.in_group(MASTERS) && admin.in_group(AUTHENTICATED));
        let a = auth.bearer("Bearer tok-a").expect("team-a");
        assert_eq!((a.name.as_str(), a.in_group(MASTERS)), ("team-a", false));
        assert!(auth.bearer("Bearer tok-b").is_none());
        assert!(auth.bearer("Bearer ").is_none());
        assert!(auth.bearer("Basic tok-a").is_none());
    }

    #[test]
    fn a_malformed_file_does_not_start_and_the_error_names_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "tok,u,1\nbroken\n").expect("write");
        let e = TokenFile::load(&path).err().expect("refused");
        let text = e.to_string();
        assert!(text.contains("tokens.csv") && text.contains("line 2"), "{text}");
        let missing = TokenFile::load(&dir.path().join("nope.csv")).err().expect("refused");
        assert!(missing.to_string().contains("nope.csv"), "{missing}");
    }

    #[tokio::test]
    async fn a_changed_file_is_read_again_a_broken_one_keeps_the_last_users_and_a_gone_one_grants_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "tok-a,team-a,a\n").expect("write");
        let (file, seen) = TokenFile::load(&path).expect("loads");
        let file = Arc::new(file);
        let auth = Authenticator::new("admin".into(), Some(file.clone()));
        let seen = file.refresh(seen).await;
        assert_eq!(file.users().len(), 1, "unchanged");

        std::fs::write(&path, "tok-a,team-a,a\ntok-b,team-b,b\n").expect("write");
        let seen = file.refresh(seen).await;
        assert_eq!(auth.authenticate("tok-b").map(|u| u.name.clone()).as_deref(), Some("team-b"));

        std::fs::write(&path, "tok-a,team-a,a\ntok-b\n").expect("write");
        let seen = file.refresh(seen).await;
        assert!(auth.authenticate("tok-b").is_some(), "a broken file keeps the last good users");

        std::fs::remove_file(&path).expect("rm");
        let seen = file.refresh(seen).await;
        assert!(seen.is_none() && auth.authenticate("tok-a").is_none(), "a removed file grants nothing");
        assert!(auth.authenticate("admin").is_some(), "the admin token does not depend on the file");

        std::fs::write(&path, "tok-c,team-c,c\n").expect("write");
        file.refresh(seen).await;
        assert!(auth.authenticate("tok-c").is_some() && auth.authenticate("tok-a").is_none());
    }
}
