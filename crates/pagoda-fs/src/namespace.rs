//! Namespace operations: lookup, readdir, create, link, unlink, rmdir, rename, open handles,
//! and the names the stream rules match.

use crate::error::{FsError, Result};
use crate::fs::{Attr, Fs, StatFs, ROOT};
use crate::layout::{Inode, Kind, Time};

impl Fs {
    /// The entry `name` of directory `parent`.
    pub fn lookup(&self, parent: u64, name: &str) -> Result<Attr> {
        self.check_up()?;
        let ino = *self
            .dir(parent)?
            .entries
            .get(name)
            .ok_or(FsError::NotFound)?;
        self.getattr(ino)
    }

    /// A directory's entries (without `.` and `..`).
    pub fn readdir(&self, ino: u64) -> Result<Vec<(u64, Kind, String)>> {
        self.check_up()?;
        let d = self.dir(ino)?;
        Ok(d.entries
            .iter()
            .map(|(n, &c)| {
                (
                    c,
                    self.inodes.get(&c).map_or(Kind::File, |i| i.kind),
                    n.clone(),
                )
            })
            .collect())
    }

    /// The parent of directory `ino` (for `..`).
    pub fn parent(&self, ino: u64) -> Result<u64> {
        Ok(self.inode(ino)?.parent)
    }

    /// Creates a file, directory or symlink (`target`) named `name` in `parent`.
    pub fn create(
        &mut self,
        parent: u64,
        name: &str,
        kind: Kind,
        perm: u32,
        owner: (u32, u32),
        target: &[u8],
    ) -> Result<Attr> {
        self.check_up()?;
        check_name(name)?;
        if self.dir(parent)?.entries.contains_key(name) {
            return Err(FsError::Exists);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let mut i = Inode::new(kind, perm & 0o7777, owner.0, owner.1);
        if kind == Kind::Symlink {
            i.target = target.to_vec();
            i.size = target.len() as u64;
        }
        self.inodes.insert(ino, i);
        self.add_entry(parent, name, ino)?;
        if kind == Kind::Dir {
            self.inode_mut(parent)?.nlink += 1;
        }
        self.dirty = true;
        self.getattr(ino)
    }

    /// A symlink's target.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        self.check_up()?;
        let i = self.inode(ino)?;
        if i.kind != Kind::Symlink {
            return Err(FsError::Invalid("not a symbolic link".into()));
        }
        Ok(i.target.clone())
    }

    pub(crate) fn add_entry(&mut self, parent: u64, name: &str, ino: u64) -> Result<()> {
        let now = Time::now();
        let d = self.inode_mut(parent)?;
        d.entries.insert(name.to_string(), ino);
        d.mtime = now;
        d.ctime = now;
        let i = self.inode_mut(ino)?;
        i.parent = parent;
        i.name = name.to_string();
        self.refresh_streams_of(ino);
        Ok(())
    }

    /// Removes a non-directory entry.
    pub fn unlink(&mut self, parent: u64, name: &str) -> Result<()> {
        self.check_up()?;
        let ino = *self
            .dir(parent)?
            .entries
            .get(name)
            .ok_or(FsError::NotFound)?;
        if self.inode(ino)?.kind == Kind::Dir {
            return Err(FsError::IsDir);
        }
        self.remove_entry(parent, name, ino)
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, parent: u64, name: &str) -> Result<()> {
        self.check_up()?;
        let ino = *self
            .dir(parent)?
            .entries
            .get(name)
            .ok_or(FsError::NotFound)?;
        let d = self.inode(ino)?;
        if d.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        if !d.entries.is_empty() {
            return Err(FsError::NotEmpty);
        }
        self.inode_mut(parent)?.nlink -= 1;
        self.inode_mut(ino)?.nlink = 1;
        self.remove_entry(parent, name, ino)
    }

    pub(crate) fn remove_entry(&mut self, parent: u64, name: &str, ino: u64) -> Result<()> {
        let now = Time::now();
        let d = self.inode_mut(parent)?;
        d.entries.remove(name);
        d.mtime = now;
        d.ctime = now;
        let i = self.inode_mut(ino)?;
        i.nlink = i.nlink.saturating_sub(1);
        i.ctime = now;
        self.dirty = true;
        self.maybe_free(ino);
        Ok(())
    }

    /// Frees an inode with no links and no open handles; its sectors become reusable after
    /// the next commit.
    pub(crate) fn maybe_free(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get(&ino) {
            if i.nlink == 0 && i.open == 0 {
                if let Some(i) = self.inodes.remove(&ino) {
                    self.pending_free
                        .extend(i.blocks.into_iter().filter(|&s| s != 0));
                }
            }
        }
    }

    /// Renames `parent/name` to `newparent/newname`, replacing a target file or empty
    /// directory. `noreplace` refuses an existing target (RENAME_NOREPLACE).
    pub fn rename(
        &mut self,
        parent: u64,
        name: &str,
        newparent: u64,
        newname: &str,
        noreplace: bool,
    ) -> Result<()> {
        self.check_up()?;
        check_name(newname)?;
        let ino = *self
            .dir(parent)?
            .entries
            .get(name)
            .ok_or(FsError::NotFound)?;
        let is_dir = self.inode(ino)?.kind == Kind::Dir;
        // A directory may not move into its own subtree.
        let mut a = newparent;
        loop {
            if a == ino {
                return Err(FsError::Invalid(
                    "cannot move a directory into itself".into(),
                ));
            }
            if a == ROOT {
                break;
            }
            a = self.dir(a)?.parent;
        }
        if let Some(&target) = self.dir(newparent)?.entries.get(newname) {
            if target == ino {
                return Ok(());
            }
            if noreplace {
                return Err(FsError::Exists);
            }
            let t = self.inode(target)?;
            match (is_dir, t.kind == Kind::Dir) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) if !t.entries.is_empty() => return Err(FsError::NotEmpty),
                (true, true) => {
                    self.inode_mut(newparent)?.nlink -= 1;
                    self.inode_mut(target)?.nlink = 1;
                }
                _ => {}
            }
            self.remove_entry(newparent, newname, target)?;
        }
        let d = self.inode_mut(parent)?;
        d.entries.remove(name);
        if is_dir {
            d.nlink -= 1;
            self.inode_mut(newparent)?.nlink += 1;
        }
        self.add_entry(newparent, newname, ino)?;
        self.inode_mut(ino)?.ctime = Time::now();
        if is_dir && !self.rules.rules().is_empty() {
            self.refresh_streams();
        }
        self.dirty = true;
        Ok(())
    }

    /// A hard link `newparent/newname` to file `ino`.
    pub fn link(&mut self, ino: u64, newparent: u64, newname: &str) -> Result<Attr> {
        self.check_up()?;
        check_name(newname)?;
        if self.inode(ino)?.kind == Kind::Dir {
            return Err(FsError::IsDir);
        }
        if self.dir(newparent)?.entries.contains_key(newname) {
            return Err(FsError::Exists);
        }
        self.inode_mut(ino)?.nlink += 1;
        self.add_entry(newparent, newname, ino)?;
        self.dirty = true;
        self.getattr(ino)
    }

    /// An open handle keeps an unlinked file's data until [`Fs::release`].
    pub fn open_file(&mut self, ino: u64) -> Result<()> {
        self.check_up()?;
        self.inode_mut(ino)?.open += 1;
        Ok(())
    }

    /// Closes a handle.
    pub fn release(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.open = i.open.saturating_sub(1);
        }
        self.maybe_free(ino);
    }

    /// Space and file counts.
    pub fn statfs(&self) -> StatFs {
        StatFs {
            blocks: self.alloc.total(),
            free: self.alloc.free(),
            files: self.inodes.len() as u64,
        }
    }

    /// The path of `ino` from the root, without the leading `/`.
    pub(crate) fn path_of(&self, ino: u64) -> String {
        let mut parts = Vec::new();
        let mut cur = ino;
        while cur != ROOT && parts.len() < 4096 {
            let Some(i) = self.inodes.get(&cur) else {
                break;
            };
            parts.push(i.name.as_str());
            cur = i.parent;
        }
        parts.reverse();
        parts.join("/")
    }

    pub(crate) fn refresh_streams_of(&mut self, ino: u64) {
        if self.rules.rules().is_empty() {
            return;
        }
        let ranges = self.rules.for_path(&self.path_of(ino));
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.streams = ranges;
        }
    }

    pub(crate) fn refresh_streams(&mut self) {
        let inos: Vec<u64> = self.inodes.keys().copied().collect();
        for ino in inos {
            self.refresh_streams_of(ino);
        }
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 || name.contains('/') || name == "." || name == ".." {
        return Err(FsError::BadName(name.to_string()));
    }
    Ok(())
}
