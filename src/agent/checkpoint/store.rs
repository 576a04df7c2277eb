//! The store of a workspace's checkpoints: beginning, opening (a
//! manifest whose signature does not check is refused), listing, pruning.

use super::*;

impl CheckpointStore {
    /// The store of the workspace at `root`, under [`cache_dir`].
    pub fn for_workspace(root: &Path) -> io::Result<Self> {
        let root = fs::canonicalize(root)?;
        let cache = cache_dir();
        let dir = cache.join("tasks").join(root_hash(&root));
        let key_path = sign::key_path_for(&dir, &cache);
        Ok(Self {
            dir,
            root,
            key_path,
        })
    }

    /// A store in `dir` (tests, or a caller with its own layout); its
    /// signing key lives in `dir`.
    pub fn with_dir(dir: impl Into<PathBuf>, root: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Self {
            key_path: dir.join(sign::KEY_FILE),
            dir,
            root: root.into(),
        }
    }

    fn key(&self) -> io::Result<Vec<u8>> {
        sign::load_or_create_key(&self.key_path)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts a new task's checkpoint. `task_id` must be a plain name
    /// (letters, digits, `-`, `_`, `.`) and new.
    pub fn begin(&self, task_id: &str, goal: &str) -> io::Result<Checkpoint> {
        check_task_id(task_id)?;
        let dir = self.dir.join(task_id);
        if fs::symlink_metadata(&dir).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("a checkpoint for task {task_id:?} already exists"),
            ));
        }
        // Strictly after every earlier task, so `latest` is exact even with
        // a coarse clock.
        let mut started = now_ns();
        if let Some(latest) = self.latest()? {
            started = started.max(latest.manifest.started_at_ns + 1);
        }
        wait_past(started);
        let key = self.key()?;
        fs::create_dir_all(dir.join(BLOBS))?;
        sync_dir(&self.dir);
        let checkpoint = Checkpoint {
            dir,
            key,
            manifest: Manifest {
                version: MANIFEST_VERSION,
                task_id: task_id.to_owned(),
                goal: goal.to_owned(),
                root: self.root.clone(),
                started_at_ns: started,
                ended_at_ns: None,
                status: None,
                files: Vec::new(),
                dirs: Vec::new(),
                hmac: None,
            },
        };
        checkpoint.save()?;
        Ok(checkpoint)
    }

    /// Re-opens a task's checkpoint (after a restart, or a crash).
    pub fn open(&self, task_id: &str) -> io::Result<Checkpoint> {
        check_task_id(task_id)?;
        let dir = self.dir.join(task_id);
        let bytes = fs::read(dir.join(MANIFEST)).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("no checkpoint for task {task_id:?}: {err}"),
            )
        })?;
        let mut manifest: Manifest = serde_json::from_slice(&bytes).map_err(|err| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the checkpoint of task {task_id:?} is corrupt: {err}"),
            )
        })?;
        let key = self.key()?;
        let signed = manifest.hmac.take();
        let expected = manifest.signature(&key)?;
        if !signed.is_some_and(|s| sign::same(&s, &expected)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the checkpoint of task {task_id:?} ({}) is not signed by this user's Fettle: it was changed by something else (or written by an older Fettle), so undo will not follow it; delete that directory, and restore the workspace from version control if needed",
                    dir.display()
                ),
            ));
        }
        if manifest.task_id != task_id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the checkpoint in {} names task {:?}, not {task_id:?}; it was moved, so undo will not follow it",
                    dir.display(),
                    manifest.task_id
                ),
            ));
        }
        Ok(Checkpoint { dir, manifest, key })
    }

    /// The most recently begun task, if any.
    pub fn latest(&self) -> io::Result<Option<Checkpoint>> {
        Ok(self
            .all()?
            .into_iter()
            .max_by_key(|c| c.manifest.started_at_ns))
    }

    /// The most recently begun task that touched a file: what "undo the
    /// last task" means when the last one only answered (a chat's
    /// question) or changed nothing.
    pub fn latest_that_touched(&self) -> io::Result<Option<Checkpoint>> {
        Ok(self
            .all()?
            .into_iter()
            .filter(|c| !c.manifest.files.is_empty())
            .max_by_key(|c| c.manifest.started_at_ns))
    }

    /// Deletes the checkpoints of finished tasks beyond the `keep` most
    /// recent (tasks still running, or cut off by a crash, are kept: they
    /// may need their undo). Returns how many were removed.
    pub fn prune(&self, keep: usize) -> io::Result<usize> {
        let mut all = self.all()?;
        all.sort_by_key(|c| std::cmp::Reverse(c.manifest.started_at_ns));
        let mut removed = 0;
        for old in all.iter().skip(keep) {
            if old.manifest.ended_at_ns.is_none() {
                continue;
            }
            fs::remove_dir_all(&old.dir)?;
            removed += 1;
        }
        Ok(removed)
    }

    pub fn list(&self) -> io::Result<Vec<TaskInfo>> {
        let mut all = self.all()?;
        all.sort_by_key(|c| std::cmp::Reverse(c.manifest.started_at_ns));
        Ok(all.iter().map(Checkpoint::info).collect())
    }

    /// Why each checkpoint that cannot be opened is refused (corrupt, or
    /// not signed by this user's Fettle), so undo can say so instead of
    /// quietly reaching an older task.
    pub fn refused(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_str()?.to_owned();
                if check_task_id(&name).is_err() || !entry.path().join(MANIFEST).exists() {
                    return None;
                }
                self.open(&name).err().map(|err| err.to_string())
            })
            .collect()
    }

    /// Every readable checkpoint; unreadable ones are logged and skipped so
    /// one corrupt task does not hide the others.
    fn all(&self) -> io::Result<Vec<Checkpoint>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if check_task_id(&name).is_err() || !entry.path().join(MANIFEST).exists() {
                continue;
            }
            match self.open(&name) {
                Ok(checkpoint) => out.push(checkpoint),
                Err(err) => tracing::warn!("skipping checkpoint {name}: {err}"),
            }
        }
        Ok(out)
    }
}
