//! Which master a Mesos client talks to: which redirect it follows, and
//! which master it tries when its own does not answer. A non-leading master answers 307
//! with the leader in `Location` (Mesos writes it protocol-relative,
//! `//HOST:PORT/PATH`); the client follows it only
//!
//! - with the scheme it was configured with: never from https to http (a
//!   protocol-relative `Location` keeps the scheme), and
//! - to one of [`Masters`]: the master it was configured with and the other
//!   replicas it was told of (an offer layer with several replicas).
//!
//! A master that refuses connections, falls silent, or knows no leader
//! (503) gives way to the next one of the set ([`Masters::next_after`]), so
//! a client given every replica finds the leader whichever died.
//!
//! Since calls only ever go to a master of that set, the credentials they
//! carry are only ever sent to one. This module owns the rule and must
//! never do I/O; [`crate::client`] asks it before each redirect it follows.

/// The scheme, host and port a URL reaches (the port filled in from the
/// scheme when the URL leaves it out).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    fn of(url: &str) -> Option<Self> {
        let url = reqwest::Url::parse(url).ok()?;
        let host = url.host_str()?.to_ascii_lowercase();
        Some(Self { scheme: url.scheme().to_owned(), host, port: url.port_or_known_default()? })
    }

    /// `url` (path and query kept) on this origin instead of its own.
    fn rebase(&self, url: &str) -> Option<String> {
        let mut moved = reqwest::Url::parse(url).ok()?;
        moved.set_scheme(&self.scheme).ok()?;
        moved.set_host(Some(&self.host)).ok()?;
        moved.set_port(Some(self.port)).ok()?;
        Some(moved.to_string())
    }
}

/// Why a redirect was not followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedirectRefusal {
    #[error("its Location is neither //HOST:PORT/PATH nor an absolute http(s) URL")]
    Unusable,
    #[error("it leaves {from} for {to}; a redirect is only followed within one scheme")]
    SchemeChanged { from: String, to: String },
    #[error(
        "it is not one of the masters this client was configured with ({allowed}); if it is a replica of the offer layer, configure the client with it"
    )]
    NotAMaster { allowed: String },
}

/// The masters a client may be redirected to: the configured one first,
/// then the other replicas.
#[derive(Debug, Clone)]
pub struct Masters {
    origins: Vec<Origin>,
    shown: Vec<String>,
}

impl Masters {
    /// Only the master at `configured` (e.g. `https://offers:5050`).
    pub fn new(configured: &str) -> Self {
        Self { origins: vec![], shown: vec![] }.with(configured)
    }

    /// The masters of a `--master` value: one URL, or several separated by
    /// commas (the replicas of an offer layer, tried in that order), and
    /// the first of them, where calls go first.
    pub fn parse(list: &str) -> (Self, String) {
        let mut bases = list.split(',').map(str::trim).filter(|b| !b.is_empty());
        let first = bases.next().unwrap_or(list).to_owned();
        (bases.fold(Self::new(&first), |m, b| m.with(b)), first)
    }

    /// Also the replica at `base`. A base that is not a URL allows nothing.
    pub fn with(mut self, base: &str) -> Self {
        if let Some(origin) = Origin::of(base) {
            self.origins.push(origin);
        }
        self.shown.push(base.to_owned());
        self
    }

    /// The URL to try after `current` failed to answer (it refused the
    /// connection, fell silent, or knows no leader): the same path on the
    /// next configured master, in the order they were given, wrapping
    /// around; `None` when there is no other. Pure.
    pub fn next_after(&self, current: &str) -> Option<String> {
        if self.origins.len() < 2 {
            return None;
        }
        let at = Origin::of(current)?;
        let index = self.origins.iter().position(|o| *o == at);
        let next = &self.origins[index.map_or(0, |i| (i + 1) % self.origins.len())];
        next.rebase(current)
    }

    /// The configured masters other than the one `current` reaches, as
    /// base URLs (`scheme://host:port`), in their order. Pure.
    pub fn others(&self, current: &str) -> Vec<String> {
        let at = Origin::of(current);
        self.origins
            .iter()
            .filter(|o| Some(*o) != at.as_ref())
            .map(|o| format!("{}://{}:{}", o.scheme, o.host, o.port))
            .collect()
    }

    /// The replica at `asked` (a base URL from [`Masters::others`]) answered
    /// `GET /master/redirect` with `location`: when it names itself, it
    /// holds the lead, and this is `current` moved to it (same path). A
    /// replica naming another is only passing on what it last read, and
    /// moves no one. Pure.
    pub fn claimed_lead(&self, current: &str, asked: &str, location: &str) -> Option<String> {
        let claimant = Origin::of(asked)?;
        let named = Origin::of(&self.follow(asked, location).ok()?)?;
        if named != claimant || Origin::of(current).as_ref() == Some(&claimant) {
            return None;
        }
        claimant.rebase(current)
    }

    /// The URL to call instead of `current` when it answered a redirect to
    /// `location`, or why the redirect is not followed.
    pub fn follow(&self, current: &str, location: &str) -> Result<String, RedirectRefusal> {
        let from = Origin::of(current).ok_or(RedirectRefusal::Unusable)?;
        let next = if let Some(rest) = location.strip_prefix("//") {
            format!("{}://{rest}", from.scheme)
        } else if location.starts_with("http://") || location.starts_with("https://") {
            location.to_owned()
        } else {
            return Err(RedirectRefusal::Unusable);
        };
        let to = Origin::of(&next).ok_or(RedirectRefusal::Unusable)?;
        if to.scheme != from.scheme {
            return Err(RedirectRefusal::SchemeChanged { from: from.scheme, to: to.scheme });
        }
        if !self.origins.contains(&to) {
            return Err(RedirectRefusal::NotAMaster { allowed: self.shown.join(", ") });
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEDULER: &str = "/api/v1/scheduler";

    #[test]
    fn only_a_replica_that_names_itself_the_leader_moves_a_client_to_it() {
        let masters = Masters::new("http://a:5050").with("http://b:5051").with("http://c:5052");
        let current = format!("http://a:5050{SCHEDULER}");
        assert_eq!(masters.others(&current), vec!["http://b:5051".to_owned(), "http://c:5052".to_owned()]);
        assert_eq!(
            masters.claimed_lead(&current, "http://b:5051", "//b:5051").as_deref(),
            Some("http://b:5051/api/v1/scheduler")
        );
        assert_eq!(masters.claimed_lead(&current, "http://b:5051", "//c:5052"), None, "hearsay");
        assert_eq!(masters.claimed_lead(&current, "http://b:5051", "//a:5050"), None, "names the current");
        assert_eq!(masters.claimed_lead(&current, "http://b:5051", "//x:1"), None, "not a configured master");
        let at_b = format!("http://b:5051{SCHEDULER}");
        assert_eq!(masters.claimed_lead(&at_b, "http://b:5051", "//b:5051"), None, "already there");
    }

    #[test]
    fn a_protocol_relative_location_to_a_known_replica_keeps_the_scheme() {
        let masters = Masters::new("https://a:5050").with("https://b:5051");
        let next = masters.follow(&format!("https://a:5050{SCHEDULER}"), &format!("//b:5051{SCHEDULER}"));
        assert_eq!(next.as_deref(), Ok("https://b:5051/api/v1/scheduler"));
        let back = masters.follow(&format!("https://b:5051{SCHEDULER}"), &format!("https://A:5050{SCHEDULER}"));
        assert_eq!(back.as_deref(), Ok("https://A:5050/api/v1/scheduler"), "host names compare without case");
        let default_port = Masters::new("http://a").follow("http://a/x", "//a:80/x");
        assert_eq!(default_port.as_deref(), Ok("http://a:80/x"));
    }

    #[test]
    fn a_master_that_does_not_answer_gives_way_to_the_next_configured_one_in_turn() {
        let masters = Masters::new("http://a:5050").with("http://b:5051").with("http://c:5052");
        let next = |url: &str| masters.next_after(url);
        assert_eq!(next("http://a:5050/api/v1/agent").as_deref(), Some("http://b:5051/api/v1/agent"));
        assert_eq!(next("http://b:5051/api/v1/agent").as_deref(), Some("http://c:5052/api/v1/agent"));
        assert_eq!(next("http://c:5052/api/v1/agent").as_deref(), Some("http://a:5050/api/v1/agent"), "wraps");
        assert_eq!(next("http://x:1/p").as_deref(), Some("http://a:5050/p"), "from elsewhere: the first");
        assert_eq!(Masters::new("http://a:5050").next_after("http://a:5050/p"), None, "no other master");
        let (parsed, first) = Masters::parse(" http://a:5050, http://b:5051,,http://c:5052 ");
        assert_eq!(first, "http://a:5050");
        assert_eq!(parsed.shown, ["http://a:5050", "http://b:5051", "http://c:5052"]);
        let (one, first) = Masters::parse("https://offers:5050");
        assert_eq!((one.shown, first.as_str()), (vec!["https://offers:5050".to_owned()], "https://offers:5050"));
    }

    #[test]
    fn a_redirect_from_https_to_http_is_refused_even_to_the_configured_master() {
        let masters = Masters::new("https://a:5050").with("http://a:5050");
        let refused = masters.follow(&format!("https://a:5050{SCHEDULER}"), &format!("http://a:5050{SCHEDULER}"));
        assert_eq!(refused, Err(RedirectRefusal::SchemeChanged { from: "https".into(), to: "http".into() }));
    }

    #[test]
    fn a_redirect_to_a_master_not_configured_is_refused_naming_the_configured_ones() {
        let masters = Masters::new("http://a:5050");
        let refused =
            masters.follow(&format!("http://a:5050{SCHEDULER}"), &format!("//evil:5050{SCHEDULER}")).unwrap_err();
        assert_eq!(refused, RedirectRefusal::NotAMaster { allowed: "http://a:5050".into() });
        assert!(refused.to_string().contains("configure the client with it"), "{refused}");
        let other_port = masters.follow("http://a:5050/x", "//a:5051/x");
        assert!(matches!(other_port, Err(RedirectRefusal::NotAMaster { .. })), "a port is part of a master");
    }

    #[test]
    fn a_relative_or_garbled_location_is_refused() {
        let masters = Masters::new("http://a:5050");
        assert_eq!(masters.follow("http://a:5050/x", "/relative"), Err(RedirectRefusal::Unusable));
        assert_eq!(masters.follow("http://a:5050/x", ""), Err(RedirectRefusal::Unusable));
        assert_eq!(masters.follow("http://a:5050/x", "//"), Err(RedirectRefusal::Unusable));
        assert_eq!(masters.follow("http://a:5050/x", "ftp://a:5050/x"), Err(RedirectRefusal::Unusable));
    }
}
