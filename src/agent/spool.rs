//! On-disk spool of results that could not be delivered yet: one JSON file per
//! [`SubmittedResult`], named `<jobId>_<leaseId>.json`, written atomically (temp file,
//! fsync, rename, fsync of the directory). A file that cannot be read back is moved to
//! `quarantine/` instead of stopping the agent. All calls block: run them off the runtime
//! threads (`spawn_blocking`).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::protocol::{LeaseRef, MAX_AGENT_BODY_BYTES, SubmittedResult};

/// Name of the sub-directory that keeps unreadable or refused files.
pub const QUARANTINE_DIR: &str = "quarantine";
/// Largest spool file read back (a larger one is quarantined).
const MAX_FILE_BYTES: u64 = MAX_AGENT_BODY_BYTES as u64;

/// A spool directory.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
}

/// A spooled result read back, or the reason it was quarantined.
#[derive(Debug)]
pub enum Loaded {
    Result(Box<SubmittedResult>),
    Quarantined { lease: LeaseRef, reason: String },
}

impl Spool {
    /// Creates the directory (owner-only) if needed and removes temp files that an
    /// interrupted write left behind.
    pub fn open(dir: &Path) -> io::Result<Spool> {
        create_private_dir(dir)?;
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            if name.to_string_lossy().ends_with(".tmp") && entry.file_type()?.is_file() {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(Spool {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `result` durably; an existing file for the same lease is replaced.
    pub fn write(&self, result: &SubmittedResult) -> io::Result<()> {
        let lease = result.lease();
        let bytes = serde_json::to_vec(result).map_err(io::Error::other)?;
        let final_path = self.dir.join(file_name(lease));
        let tmp_path = self.dir.join(format!(
            ".{}_{}.{}.tmp",
            lease.job_id,
            lease.lease_id,
            Uuid::new_v4().simple()
        ));
        let written = (|| {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp_path)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&tmp_path, &final_path)?;
            sync_dir(&self.dir)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp_path);
        }
        written
    }

    /// Leases of the spooled results, in a stable order. Other files are ignored.
    pub fn list(&self) -> io::Result<Vec<LeaseRef>> {
        let mut leases = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            if let Some(lease) = entry.file_name().to_str().and_then(parse_file_name) {
                leases.push(lease);
            }
        }
        leases.sort_by_key(|l| (l.job_id, l.lease_id));
        Ok(leases)
    }

    /// Whether any result waits in the spool.
    pub fn is_empty(&self) -> io::Result<bool> {
        Ok(self.list()?.is_empty())
    }

    /// Reads one spooled result back. A file that is too large, not JSON, or not about
    /// the lease its name says is moved to quarantine.
    pub fn load(&self, lease: LeaseRef) -> io::Result<Loaded> {
        let path = self.dir.join(file_name(lease));
        let file = fs::File::open(&path)?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
        let problem = if bytes.len() as u64 > MAX_FILE_BYTES {
            format!("larger than {MAX_FILE_BYTES} bytes")
        } else {
            match serde_json::from_slice::<SubmittedResult>(&bytes) {
                Ok(r) if r.lease() == lease => return Ok(Loaded::Result(Box::new(r))),
                Ok(_) => "its content is about another lease".to_owned(),
                Err(e) => format!("not a result: {e}"),
            }
        };
        self.quarantine(lease)?;
        Ok(Loaded::Quarantined {
            lease,
            reason: problem,
        })
    }

    /// Removes a delivered result; a file already gone is fine.
    pub fn remove(&self, lease: LeaseRef) -> io::Result<()> {
        match fs::remove_file(self.dir.join(file_name(lease))) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Moves a spooled file to `quarantine/`, out of the delivery path.
    pub fn quarantine(&self, lease: LeaseRef) -> io::Result<()> {
        let qdir = self.dir.join(QUARANTINE_DIR);
        create_private_dir(&qdir)?;
        let name = file_name(lease);
        fs::rename(self.dir.join(&name), qdir.join(&name))?;
        sync_dir(&self.dir)
    }

    /// Writes a result straight to `quarantine/` (the service refused it for good).
    pub fn write_quarantined(&self, result: &SubmittedResult) -> io::Result<()> {
        self.write(result)?;
        self.quarantine(result.lease())
    }
}

/// `<jobId>_<leaseId>.json`.
pub fn file_name(lease: LeaseRef) -> String {
    format!("{}_{}.json", lease.job_id, lease.lease_id)
}

fn parse_file_name(name: &str) -> Option<LeaseRef> {
    let stem = name.strip_suffix(".json")?;
    let (job, lease) = stem.split_once('_')?;
    Some(LeaseRef {
        job_id: Uuid::parse_str(job).ok()?,
        lease_id: Uuid::parse_str(lease).ok()?,
    })
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CheckType, ErrorKind, RunResult};

    fn result() -> SubmittedResult {
        SubmittedResult {
            job_id: Uuid::new_v4(),
            lease_id: Uuid::new_v4(),
            result: RunResult::errored(
                CheckType::Url,
                chrono::Utc::now(),
                ErrorKind::Connect,
                "refused",
            ),
        }
    }

    #[test]
    fn write_list_load_remove_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let spool = Spool::open(&tmp.path().join("spool")).unwrap();
        assert!(spool.is_empty().unwrap());
        let a = result();
        let b = result();
        spool.write(&a).unwrap();
        spool.write(&b).unwrap();
        spool.write(&a).unwrap(); // rewriting the same lease keeps one file
        let mut expected = vec![a.lease(), b.lease()];
        expected.sort_by_key(|l| (l.job_id, l.lease_id));
        assert_eq!(spool.list().unwrap(), expected);
        match spool.load(a.lease()).unwrap() {
            Loaded::Result(r) => assert_eq!(r.result, a.result),
            other => panic!("{other:?}"),
        }
        spool.remove(a.lease()).unwrap();
        spool.remove(a.lease()).unwrap(); // already gone is fine
        assert_eq!(spool.list().unwrap(), vec![b.lease()]);
        // Nothing but the result files is left (no temp files).
        let names: Vec<_> = fs::read_dir(spool.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![file_name(b.lease())]);
    }

    #[test]
    fn corrupt_file_is_quarantined_not_fatal() {
        let tmp = tempfile::tempdir().unwrap();
        let spool = Spool::open(tmp.path()).unwrap();
        let good = result();
        spool.write(&good).unwrap();
        let bad = result().lease();
        fs::write(tmp.path().join(file_name(bad)), b"{not json").unwrap();
        // A file whose name and content disagree is corrupt too.
        let other = result();
        let renamed = result().lease();
        fs::write(
            tmp.path().join(file_name(renamed)),
            serde_json::to_vec(&other).unwrap(),
        )
        .unwrap();
        assert_eq!(spool.list().unwrap().len(), 3);
        assert!(matches!(
            spool.load(bad).unwrap(),
            Loaded::Quarantined { .. }
        ));
        assert!(matches!(
            spool.load(renamed).unwrap(),
            Loaded::Quarantined { .. }
        ));
        assert!(matches!(
            spool.load(good.lease()).unwrap(),
            Loaded::Result(_)
        ));
        assert_eq!(spool.list().unwrap(), vec![good.lease()]);
        assert!(
            tmp.path()
                .join(QUARANTINE_DIR)
                .join(file_name(bad))
                .is_file()
        );
    }

    #[test]
    fn interrupted_writes_are_invisible_and_cleaned_up() {
        let tmp = tempfile::tempdir().unwrap();
        let r = result();
        let l = r.lease();
        // What a crash between create and rename leaves behind.
        let tmp_name = format!(".{}_{}.abc.tmp", l.job_id, l.lease_id);
        fs::write(tmp.path().join(&tmp_name), b"{\"partial").unwrap();
        fs::write(tmp.path().join("README"), b"not a result").unwrap();
        let spool = Spool::open(tmp.path()).unwrap();
        assert!(spool.list().unwrap().is_empty());
        assert!(!tmp.path().join(&tmp_name).exists());
        assert!(
            tmp.path().join("README").exists(),
            "foreign files are left alone"
        );
        spool.write(&r).unwrap();
        assert_eq!(spool.list().unwrap(), vec![l]);
    }

    #[test]
    fn refused_results_go_to_quarantine() {
        let tmp = tempfile::tempdir().unwrap();
        let spool = Spool::open(tmp.path()).unwrap();
        let r = result();
        spool.write_quarantined(&r).unwrap();
        assert!(spool.list().unwrap().is_empty());
        assert!(
            tmp.path()
                .join(QUARANTINE_DIR)
                .join(file_name(r.lease()))
                .is_file()
        );
    }

    #[test]
    fn file_names_round_trip() {
        let l = result().lease();
        assert_eq!(parse_file_name(&file_name(l)), Some(l));
        assert_eq!(parse_file_name("x_y.json"), None);
        assert_eq!(parse_file_name(&format!(".{}.tmp", file_name(l))), None);
    }
}
