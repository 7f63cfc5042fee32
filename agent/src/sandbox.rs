//! The kept output of tasks, like a Mesos sandbox: for each task, its stdout
//! and stderr under `DATA/sandbox/<framework id>/<task id>/`, each bounded to
//! the last `limit` bytes. The on-disk format only; every call blocks on the
//! disk, so the agent calls them from `spawn_blocking`, never on an async
//! worker and never under a lock.
//!
//! A stream is a run of segment files `<stream>.<start offset>`, each at most
//! `limit / 2` bytes; only the last two are kept, so between `limit / 2` and
//! `limit` bytes survive. Offsets count every byte the task ever wrote, so a
//! reader following a task never sees an offset go back; bytes before the
//! kept window are simply gone. `<stream>.cursor` remembers the timestamp of
//! the last log line kept, so a resumed follower writes no line twice.
//! Nothing but the task's own output is written here (no TaskInfo, no secret).

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Which output of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub const ALL: [Stream; 2] = [Stream::Stdout, Stream::Stderr];

    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Where a follower stands in a task's log: the timestamp (nanoseconds since
/// the epoch) of the last line kept, and how many lines with exactly that
/// timestamp were kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub nanos: i64,
    pub at_nanos: u64,
}

impl Cursor {
    /// Whether a line stamped `nanos` is new; `seen_at` counts lines with the
    /// cursor's own timestamp met so far in this read of the log. Advances
    /// the cursor past a new line.
    pub fn admit(&mut self, nanos: i64, seen_at: &mut u64) -> bool {
        if nanos < self.nanos {
            return false;
        }
        if nanos == self.nanos {
            *seen_at += 1;
            if *seen_at <= self.at_nanos {
                return false;
            }
            self.at_nanos += 1;
            return true;
        }
        *self = Cursor { nanos, at_nanos: 1 };
        *seen_at = 1;
        true
    }
}

/// One entry of a `/files/browse` listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub is_dir: bool,
    /// For a stream: every byte the task wrote to it.
    pub size: u64,
    pub mtime: SystemTime,
}

/// The sandbox root and its bound.
#[derive(Debug, Clone)]
pub struct Sandbox {
    root: PathBuf,
    limit: u64,
}

impl Sandbox {
    /// Output under `root`, keeping at most `limit` bytes per stream (at least 2).
    pub fn new(root: PathBuf, limit: u64) -> Self {
        Self { root, limit: limit.max(2) }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The directory of one task's output.
    pub fn task_dir(&self, framework_id: &str, task_id: &str) -> PathBuf {
        self.root.join(encode(framework_id)).join(encode(task_id))
    }

    /// Appends `data` to a stream and records `cursor` with it.
    pub fn append(
        &self,
        framework_id: &str,
        task_id: &str,
        stream: Stream,
        data: &[u8],
        cursor: Cursor,
    ) -> std::io::Result<()> {
        let dir = self.task_dir(framework_id, task_id);
        std::fs::create_dir_all(&dir)?;
        let half = self.limit / 2;
        let mut segments = segments(&dir, stream)?;
        let mut rest = data;
        while !rest.is_empty() {
            let (start, len) = match segments.last() {
                Some(&(start, len)) if len < half => (start, len),
                last => {
                    let end = last.map_or(0, |&(s, l)| s + l);
                    // A chunk longer than a segment keeps only its tail.
                    let skip = (rest.len() as u64).saturating_sub(half);
                    let skip_bytes = usize::try_from(skip).unwrap_or(rest.len());
                    rest = &rest[skip_bytes..];
                    if skip > 0 {
                        // Older segments would leave a gap before this one:
                        // the window starts here.
                        for (start, _) in segments.drain(..) {
                            std::fs::remove_file(segment_path(&dir, stream, start))?;
                        }
                    }
                    segments.push((end + skip, 0));
                    (end + skip, 0)
                }
            };
            let room = usize::try_from(half - len).unwrap_or(usize::MAX);
            let (now, later) = rest.split_at(room.min(rest.len()));
            let mut file =
                std::fs::OpenOptions::new().create(true).append(true).open(segment_path(&dir, stream, start))?;
            file.write_all(now)?;
            if let Some(last) = segments.last_mut() {
                last.1 += now.len() as u64;
            }
            rest = later;
        }
        while segments.len() > 2 {
            let (start, _) = segments.remove(0);
            std::fs::remove_file(segment_path(&dir, stream, start))?;
        }
        write_cursor(&dir, stream, cursor)
    }

    /// Where the follower of a stream stood (the default if it never wrote).
    pub fn cursor(&self, framework_id: &str, task_id: &str, stream: Stream) -> Cursor {
        let path = self.task_dir(framework_id, task_id).join(format!("{}.cursor", stream.name()));
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut parts = text.split_whitespace().map(str::parse::<i64>);
        match (parts.next(), parts.next()) {
            (Some(Ok(nanos)), Some(Ok(n))) => Cursor { nanos, at_nanos: u64::try_from(n).unwrap_or(0) },
            _ => Cursor::default(),
        }
    }

    /// Whether the task has a sandbox.
    pub fn exists(&self, framework_id: &str, task_id: &str) -> bool {
        self.task_dir(framework_id, task_id).is_dir()
    }

    /// Every byte written to the stream, or `None` if the task has no sandbox.
    pub fn size(&self, framework_id: &str, task_id: &str, stream: Stream) -> std::io::Result<Option<u64>> {
        let dir = self.task_dir(framework_id, task_id);
        if !dir.is_dir() {
            return Ok(None);
        }
        Ok(Some(segments(&dir, stream)?.last().map_or(0, |&(s, l)| s + l)))
    }

    /// Up to `length` bytes of the stream from `offset`; the offset the data
    /// really starts at (later than asked when those bytes are no longer
    /// kept). `None` if the task has no sandbox.
    pub fn read(
        &self,
        framework_id: &str,
        task_id: &str,
        stream: Stream,
        offset: u64,
        length: u64,
    ) -> std::io::Result<Option<(u64, Vec<u8>)>> {
        let dir = self.task_dir(framework_id, task_id);
        if !dir.is_dir() {
            return Ok(None);
        }
        let segments = segments(&dir, stream)?;
        let window_start = segments.first().map_or(0, |&(s, _)| s);
        let mut start = offset.max(window_start);
        let mut out = Vec::new();
        let mut at = start;
        for (seg_start, seg_len) in segments {
            let seg_end = seg_start + seg_len;
            if at >= seg_end || out.len() as u64 >= length {
                continue;
            }
            if at < seg_start {
                // Bytes between segments were dropped (one chunk longer
                // than a segment): the answer is contiguous, so it stops
                // before the gap, or starts after it.
                if !out.is_empty() {
                    break;
                }
                (start, at) = (seg_start, seg_start);
            }
            let want = (seg_end - at).min(length - out.len() as u64);
            let mut file = std::fs::File::open(segment_path(&dir, stream, seg_start))?;
            file.seek(SeekFrom::Start(at - seg_start))?;
            let before = out.len();
            file.take(want).read_to_end(&mut out)?;
            at += (out.len() - before) as u64;
        }
        Ok(Some((start, out)))
    }

    /// What is under `path` (`[]`: the frameworks; `[fw]`: its tasks;
    /// `[fw, task]`: the two streams); `None` if it does not exist.
    pub fn browse(&self, path: &[&str]) -> std::io::Result<Option<Vec<Entry>>> {
        match path {
            [] | [_] => {
                let dir = path.iter().fold(self.root.clone(), |d, p| d.join(encode(p)));
                if !dir.is_dir() {
                    // No task ever wrote: the root is empty, not missing.
                    return Ok(path.is_empty().then(Vec::new));
                }
                let mut entries = Vec::new();
                for entry in std::fs::read_dir(&dir)? {
                    let entry = entry?;
                    let Some(name) = entry.file_name().to_str().and_then(decode) else { continue };
                    let meta = entry.metadata()?;
                    entries.push(Entry { name, is_dir: true, size: 0, mtime: meta.modified()? });
                }
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(Some(entries))
            }
            [fw, task] => {
                let dir = self.task_dir(fw, task);
                if !dir.is_dir() {
                    return Ok(None);
                }
                let mut entries = Vec::new();
                for stream in Stream::ALL {
                    let segments = segments(&dir, stream)?;
                    let size = segments.last().map_or(0, |&(s, l)| s + l);
                    let mtime = match segments.last() {
                        Some(&(start, _)) => std::fs::metadata(segment_path(&dir, stream, start))?.modified()?,
                        None => std::fs::metadata(&dir)?.modified()?,
                    };
                    entries.push(Entry { name: stream.name().to_owned(), is_dir: false, size, mtime });
                }
                Ok(Some(entries))
            }
            _ => Ok(None),
        }
    }

    pub fn remove(&self, framework_id: &str, task_id: &str) -> std::io::Result<()> {
        let dir = self.task_dir(framework_id, task_id);
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => {
                // The framework's directory goes with its last task.
                if let Some(parent) = dir.parent() {
                    let _ = std::fs::remove_dir(parent);
                }
                Ok(())
            }
        }
    }

    /// Removes the output of every task `keep` does not claim whose last
    /// write is older than `retention` at `now`; returns them as (framework, task).
    pub fn expire(
        &self,
        now: SystemTime,
        retention: Duration,
        keep: impl Fn(&str, &str) -> bool,
    ) -> std::io::Result<Vec<(String, String)>> {
        let mut removed = Vec::new();
        let Some(frameworks) = self.browse(&[])? else { return Ok(removed) };
        for fw in frameworks {
            for task in self.browse(&[&fw.name])?.unwrap_or_default() {
                if keep(&fw.name, &task.name) {
                    continue;
                }
                let newest = self
                    .browse(&[&fw.name, &task.name])?
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| e.mtime)
                    .max()
                    .unwrap_or(task.mtime);
                if now.duration_since(newest).is_ok_and(|age| age >= retention) {
                    self.remove(&fw.name, &task.name)?;
                    removed.push((fw.name.clone(), task.name));
                }
            }
        }
        Ok(removed)
    }
}

fn segment_path(dir: &Path, stream: Stream, start: u64) -> PathBuf {
    dir.join(format!("{}.{start:020}", stream.name()))
}

/// The segments of a stream, oldest first, as (start offset, length).
fn segments(dir: &Path, stream: Stream) -> std::io::Result<Vec<(u64, u64)>> {
    let prefix = format!("{}.", stream.name());
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(start) = name.to_str().and_then(|n| n.strip_prefix(&prefix)).and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((start, entry.metadata()?.len()));
    }
    out.sort_unstable();
    Ok(out)
}

fn write_cursor(dir: &Path, stream: Stream, cursor: Cursor) -> std::io::Result<()> {
    let path = dir.join(format!("{}.cursor", stream.name()));
    let tmp = dir.join(format!("{}.cursor.tmp", stream.name()));
    std::fs::write(&tmp, format!("{} {}", cursor.nanos, cursor.at_nanos))?;
    std::fs::rename(tmp, path)
}

/// An id as one safe directory name: bytes other than ASCII letters, digits,
/// `-` and `_` (and `.` after the first byte) become `%XX`, so `..` or `/`
/// in an id cannot leave the sandbox.
fn encode(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for (i, b) in id.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() { "%".to_owned() } else { out }
}

fn decode(name: &str) -> Option<String> {
    if name == "%" {
        return Some(String::new());
    }
    percent_decode(name)
}

/// `%XX` sequences back to their bytes; `None` if a sequence is malformed
/// or the result is not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(limit: u64) -> (tempfile::TempDir, Sandbox) {
        let dir = tempfile::tempdir().unwrap();
        let s = Sandbox::new(dir.path().join("sandbox"), limit);
        (dir, s)
    }

    fn read_all(s: &Sandbox, offset: u64) -> (u64, String) {
        let (at, data) = s.read("fw", "t", Stream::Stdout, offset, u64::MAX).unwrap().unwrap();
        (at, String::from_utf8(data).unwrap())
    }

    #[test]
    fn reads_at_offsets_see_what_was_appended() {
        let (_d, s) = sandbox(1024);
        s.append("fw", "t", Stream::Stdout, b"hello\n", Cursor::default()).unwrap();
        s.append("fw", "t", Stream::Stdout, b"world\n", Cursor { nanos: 5, at_nanos: 1 }).unwrap();
        assert_eq!(s.size("fw", "t", Stream::Stdout).unwrap(), Some(12));
        assert_eq!(s.size("fw", "t", Stream::Stderr).unwrap(), Some(0));
        assert_eq!(read_all(&s, 0), (0, "hello\nworld\n".into()));
        assert_eq!(read_all(&s, 6), (6, "world\n".into()));
        assert_eq!(s.read("fw", "t", Stream::Stdout, 2, 3).unwrap().unwrap(), (2, b"llo".to_vec()));
        assert_eq!(read_all(&s, 99), (99, String::new()));
        assert_eq!(s.cursor("fw", "t", Stream::Stdout), Cursor { nanos: 5, at_nanos: 1 });
        assert_eq!(s.read("fw", "other", Stream::Stdout, 0, 1).unwrap(), None);
    }

    #[test]
    fn a_stream_keeps_only_its_last_bytes_and_offsets_never_go_back() {
        let (d, s) = sandbox(100);
        for i in 0..100u32 {
            s.append("fw", "t", Stream::Stdout, format!("{i:09}\n").as_bytes(), Cursor::default()).unwrap();
        }
        let size = s.size("fw", "t", Stream::Stdout).unwrap().unwrap();
        assert_eq!(size, 1000, "offsets count every byte written");
        let (at, data) = read_all(&s, 0);
        assert!(data.len() <= 100 && data.len() >= 50, "kept {} bytes", data.len());
        assert_eq!(at + data.len() as u64, 1000, "the window ends at the end");
        assert!(data.ends_with("000000099\n"), "{data}");
        let on_disk: u64 = std::fs::read_dir(d.path().join("sandbox/fw/t"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(on_disk <= 100 + 16, "the directory holds {on_disk} bytes");
        // One chunk larger than the whole bound keeps its tail.
        s.append("fw", "t", Stream::Stdout, &[b'x'; 500], Cursor::default()).unwrap();
        assert_eq!(s.size("fw", "t", Stream::Stdout).unwrap(), Some(1500));
        let (at, data) = read_all(&s, 0);
        assert_eq!((at, data.len()), (1450, 50), "the tail of the chunk, nothing older");
        assert!(data.bytes().all(|b| b == b'x'), "{data}");
    }

    #[test]
    fn ids_cannot_escape_the_sandbox_and_browse_names_them_back() {
        let (d, s) = sandbox(64);
        s.append("../fw", "a/../../t", Stream::Stderr, b"e", Cursor::default()).unwrap();
        let dir = s.task_dir("../fw", "a/../../t");
        assert!(
            dir.starts_with(d.path().join("sandbox"))
                && dir.components().count() == d.path().join("sandbox").components().count() + 2
        );
        let fws = s.browse(&[]).unwrap().unwrap();
        assert_eq!(fws.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), vec!["../fw"]);
        let tasks = s.browse(&["../fw"]).unwrap().unwrap();
        assert_eq!(tasks[0].name, "a/../../t");
        let files = s.browse(&["../fw", "a/../../t"]).unwrap().unwrap();
        let sizes: Vec<_> = files.iter().map(|e| (e.name.as_str(), e.size)).collect();
        assert_eq!(sizes, vec![("stdout", 0), ("stderr", 1)]);
        assert_eq!(s.browse(&["nope", "x"]).unwrap(), None);
        assert_eq!(decode(&encode("")), Some(String::new()));
        assert_eq!(decode(&encode(".hidden")), Some(".hidden".into()));
    }

    #[test]
    fn expiry_removes_old_unclaimed_output_only() {
        let (_d, s) = sandbox(64);
        s.append("fw", "old", Stream::Stdout, b"1", Cursor::default()).unwrap();
        s.append("fw", "kept", Stream::Stdout, b"2", Cursor::default()).unwrap();
        let now = SystemTime::now();
        assert!(s.expire(now, Duration::from_secs(3600), |_, _| false).unwrap().is_empty(), "too young");
        let later = now + Duration::from_secs(7200);
        let removed = s.expire(later, Duration::from_secs(3600), |_, t| t == "kept").unwrap();
        assert_eq!(removed, vec![("fw".to_owned(), "old".to_owned())]);
        assert!(!s.exists("fw", "old") && s.exists("fw", "kept"));
        s.remove("fw", "kept").unwrap();
        assert_eq!(s.browse(&[]).unwrap().unwrap(), vec![], "the framework's directory went with its last task");
    }

    #[test]
    fn the_cursor_admits_each_line_once_across_reads() {
        let mut c = Cursor::default();
        let mut seen = 0;
        let first: Vec<bool> = [10, 10, 20].iter().map(|&n| c.admit(n, &mut seen)).collect();
        assert_eq!(first, vec![true, true, true]);
        assert_eq!(c, Cursor { nanos: 20, at_nanos: 1 });
        // A second read from an earlier second sees the same lines and one more.
        let mut seen = 0;
        let again: Vec<bool> = [10, 10, 20, 20, 30].iter().map(|&n| c.admit(n, &mut seen)).collect();
        assert_eq!(again, vec![false, false, false, true, true]);
    }
}
