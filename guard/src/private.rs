//! Files and directories only their owner may open: the one home of how
//! mpiswarm keeps its secrets on disk (the API server's token, keys,
//! kubeconfig and store, which holds every Secret and the jobs' SSH keys;
//! the offer layer's registry; the agents' task output).
//!
//! A directory is created `0700` and a file `0600` **from the start**, by the
//! `mode` of the call that creates it, never written first and narrowed
//! afterwards (between the two another local user could open it and keep the
//! descriptor). What an earlier version left wider is narrowed when it is
//! opened again, so an upgrade closes it too.
//!
//! Blocking, as all file work is: call it before the runtime serves, or
//! from `spawn_blocking`, never on an async worker while a lock is held.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of a private directory: its owner lists, enters and writes it.
pub const DIR_MODE: u32 = 0o700;
/// The mode of a private file: its owner reads and writes it.
pub const FILE_MODE: u32 = 0o600;

/// Creates `path` and its missing parents, each created `0700`, and narrows
/// `path` itself to `0700` if it existed wider. Parents that existed are
/// left as they are (they may be the user's home or `/var/lib`).
pub fn dir(path: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(path)?;
    narrow(path, DIR_MODE)
}

/// Creates `path` empty and `0600` if it does not exist, or narrows it to
/// `0600` if it does; its contents are kept. For a file another library
/// opens by name afterwards, such as an SQLite database (whose `-wal` and
/// `-shm` files SQLite creates with the database file's own mode).
pub fn file(path: &Path) -> std::io::Result<()> {
    OpenOptions::new().append(true).create(true).mode(FILE_MODE).open(path)?;
    narrow(path, FILE_MODE)
}

/// Narrows `path` to `0600` if it exists (what an earlier version left
/// readable by others, before it is read again); a missing file stays
/// missing. Whether it is missing is decided by the call, not by a check
/// before it, so there is no window between the two.
pub fn narrow_existing(path: &Path) -> std::io::Result<()> {
    match narrow(path, FILE_MODE) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Replaces `path` with `contents` atomically and durably: a temporary file
/// beside it, created `0600` (a stale one from a crash is removed first, so
/// its mode cannot carry over), written, synced, renamed over `path`, and
/// the directory synced. A reader sees the old contents or the new, never a
/// part, and never a moment in which the new contents are readable by
/// others; after a crash the file holds one or the other.
pub fn write(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut f: File = OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(&tmp)?;
    f.write_all(contents)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => File::open(parent)?.sync_all(),
        _ => File::open(".")?.sync_all(),
    }
}

/// Narrows `path` to `mode` when group or others have any access to it.
fn narrow(path: &Path, mode: u32) -> std::io::Result<()> {
    let current = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    if current & !mode != 0 {
        std::fs::set_permissions(path, Permissions::from_mode(current & mode))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_directory_and_its_new_parents_are_the_owners_alone() {
        let root = tempfile::tempdir().unwrap();
        let leaf = root.path().join("a/b/c");
        dir(&leaf).unwrap();
        assert_eq!(mode(&leaf), 0o700);
        assert_eq!(mode(&root.path().join("a")), 0o700);
        assert_eq!(mode(&root.path().join("a/b")), 0o700);
    }

    #[test]
    fn a_wider_directory_left_by_an_earlier_version_is_narrowed_and_keeps_its_contents() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("data");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, Permissions::from_mode(0o755)).unwrap();
        std::fs::write(d.join("kept"), "x").unwrap();
        dir(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
        assert_eq!(std::fs::read_to_string(d.join("kept")).unwrap(), "x");
    }

    #[test]
    fn narrowing_an_existing_file_keeps_it_and_a_missing_one_stays_missing() {
        let root = tempfile::tempdir().unwrap();
        let wide = root.path().join("state.sqlite-wal");
        std::fs::write(&wide, "log").unwrap();
        std::fs::set_permissions(&wide, Permissions::from_mode(0o644)).unwrap();
        narrow_existing(&wide).unwrap();
        assert_eq!((mode(&wide), std::fs::read_to_string(&wide).unwrap().as_str()), (0o600, "log"));
        let missing = root.path().join("state.sqlite-shm");
        narrow_existing(&missing).unwrap();
        assert!(!missing.exists());
    }

    #[test]
    fn a_parent_that_existed_is_left_as_it_was() {
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), Permissions::from_mode(0o755)).unwrap();
        dir(&root.path().join("data")).unwrap();
        assert_eq!(mode(root.path()), 0o755);
    }

    #[test]
    fn written_files_are_0600_whatever_the_old_file_or_a_stale_temporary_allowed() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("kubeconfig");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        let stale = root.path().join("kubeconfig.tmp");
        std::fs::write(&stale, "stale").unwrap();
        std::fs::set_permissions(&stale, Permissions::from_mode(0o666)).unwrap();
        write(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(mode(&path), 0o600);
        assert!(!stale.exists(), "the temporary was renamed over the file");
    }

    #[test]
    fn a_file_is_created_empty_or_narrowed_with_its_contents_kept() {
        let root = tempfile::tempdir().unwrap();
        let fresh = root.path().join("state.sqlite");
        file(&fresh).unwrap();
        assert_eq!((mode(&fresh), std::fs::read(&fresh).unwrap().len()), (0o600, 0));
        let old = root.path().join("old.sqlite");
        std::fs::write(&old, "rows").unwrap();
        std::fs::set_permissions(&old, Permissions::from_mode(0o644)).unwrap();
        file(&old).unwrap();
        assert_eq!((mode(&old), std::fs::read_to_string(&old).unwrap().as_str()), (0o600, "rows"));
    }
}
