//! The test file, and the checks that keep peakbench from ever touching a user's data.
//!
//! peakbench writes only to a file it created itself: `peakbench-<16 hex>.tmp`, opened with
//! `O_CREAT | O_EXCL`, whose first block is a header that starts with [`MAGIC`]. A path that
//! exists without that header is refused, so is any block device unless the user names it with
//! `--allow-device-write` and it passes the checks of [`super::device`] (held with `O_EXCL`,
//! no partitions, no signature libblkid knows). Free space is checked (statvfs) before the file
//! is created, with a margin. The file is registered with [`crate::interrupt`] (a second Ctrl-C
//! removes it) and removed by `Drop` on every way out (end, error, first Ctrl-C, panic) unless
//! `--keep` is given; a kept file is found and reused by the next run in the same directory.
//!
//! The file is opened once, by name, never through a symbolic link (`O_NOFOLLOW`; `O_EXCL` on
//! create), and `fstat` must show a regular file owned by the effective user with one link (and,
//! when reused, the full length and a complete header). Every later descriptor (the fill with
//! `O_DIRECT`, each case's workers) is reopened through `/proc/self/fd/N`, the same inode whatever
//! happens to the name meanwhile; a planted `peakbench-*.tmp` cannot redirect a write.
//!
//! Layout: the header block (`data_offset` bytes, a multiple of the O_DIRECT alignment) then the
//! data region, filled with pseudo-random bytes before any read. Every 4 KiB of the data carries
//! its own file offset XOR the file's tag in its first 8 bytes, so that a read can check that the
//! bytes came from where it asked (see [`super::stamp`]).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, Result, bail};

use crate::interrupt;
use crate::rng::Rng;

use super::buffer::AlignedBuf;
use super::device::HeldDevice;
use super::error::{TargetError, io_error};
use super::stamp::stamp;

/// The first bytes of every peakbench test file.
pub(crate) const MAGIC: &[u8] = b"PEAKBENCH DISK TEST FILE v1\n";
/// Free space left on the file system after the test file is created: this much plus 1 %.
pub(crate) const SPACE_MARGIN: u64 = 64 << 20;
const FILL_CHUNK: usize = 4 << 20;

/// Where the cases do their I/O, as checked at plan time.
#[derive(Clone, Debug)]
pub(crate) enum Place {
    /// A new file in this directory (or a kept one found there with `--keep`).
    Dir(PathBuf),
    /// A new file at this path, or a peakbench file that already exists there.
    File(PathBuf),
    /// A block device the user allowed with `--allow-device-write`: checked, and held open
    /// with `O_EXCL` until the run ends.
    Device(Arc<HeldDevice>),
}

/// What the plan found out about the target before anything is created.
#[derive(Clone, Debug)]
pub(crate) struct TargetSpec {
    pub place: Place,
    /// Bytes of the data region.
    pub data_bytes: u64,
    /// O_DIRECT alignment of offsets, lengths and buffers (the device's logical block size).
    pub align: u64,
    /// Where `align` comes from.
    pub align_source: String,
    pub keep: bool,
    /// Fill with O_DIRECT (otherwise buffered writes and an fsync).
    pub direct_fill: bool,
}

/// The open test file, shared by every case of a run; removed when the last case drops it.
#[derive(Debug)]
pub(crate) struct TestFile {
    /// The name the file was opened by (shown to the user; never opened again).
    pub path: PathBuf,
    /// The one descriptor opened by name; every other is derived from it.
    handle: File,
    pub data_offset: u64,
    pub data_bytes: u64,
    pub tag: u64,
    pub align: u64,
    pub is_device: bool,
    /// Another program (fio) wrote to the file: reads can no longer check the content.
    foreign_writes: AtomicBool,
    remove_on_drop: bool,
    keep: bool,
    /// The data region holds the whole fill: only then may `--keep` keep the file.
    filled: AtomicBool,
}

impl TestFile {
    /// A path that reopens this very file (`/proc/self/fd/N`), not whatever has its name now.
    pub(crate) fn fd_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.handle.as_raw_fd()))
    }

    /// A new descriptor of this very file or device (through [`TestFile::fd_path`]), read-only
    /// or read-write, with `O_DIRECT` or not; checked to be the same inode (and device number)
    /// as the one descriptor opened by name.
    pub(crate) fn reopen(&self, write: bool, direct: bool) -> Result<File> {
        let mut options = OpenOptions::new();
        options.read(true).write(write);
        options.custom_flags(libc::O_CLOEXEC | if direct { libc::O_DIRECT } else { 0 });
        let file = options
            .open(self.fd_path())
            .with_context(|| format!("opening {}", self.path.display()))?;
        let (new, ours) = (file.metadata()?, self.handle.metadata()?);
        if (new.dev(), new.ino(), new.rdev()) != (ours.dev(), ours.ino(), ours.rdev()) {
            bail!(
                "{} reopened as another file (inode {} on device {:#x}, not {} on {:#x})",
                self.path.display(),
                new.ino(),
                new.dev(),
                ours.ino(),
                ours.dev()
            );
        }
        Ok(file)
    }

    /// A duplicate of the one descriptor for a tool to inherit (3 or more, close-on-exec; see
    /// [`crate::reference::inherit_fd`]): the tool opens `/proc/self/fd/N`, never the name.
    pub(crate) fn share_with_tool(&self) -> Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        crate::reference::dup_for_child(self.handle.as_fd())
            .with_context(|| format!("passing {} to a tool", self.path.display()))
    }

    /// Whether the name still refers to the file that was opened (then it may be unlinked).
    fn name_is_ours(&self) -> bool {
        match (
            std::fs::symlink_metadata(&self.path),
            self.handle.metadata(),
        ) {
            (Ok(named), Ok(ours)) => named.dev() == ours.dev() && named.ino() == ours.ino(),
            _ => false,
        }
    }

    /// Whether reads can still check each 4 KiB's offset stamp.
    pub(crate) fn verifiable(&self) -> bool {
        !self.foreign_writes.load(Ordering::SeqCst)
    }

    /// Records that another program wrote into the data region.
    pub(crate) fn mark_foreign_writes(&self) {
        self.foreign_writes.store(true, Ordering::SeqCst);
    }

    /// Writes back and drops the file's cached pages before a case, as fio's default
    /// `invalidate=1` does: buffered reads then start from the disk, not from what the fill or
    /// the last case left in memory, and both tools start their jobs from the same state.
    pub(crate) fn drop_cached_pages(&self) -> Result<()> {
        use std::os::fd::AsRawFd;
        let file = &self.handle;
        file.sync_data()
            .with_context(|| format!("writing back {}", self.path.display()))?;
        // SAFETY: plain advice on an open descriptor; 0, 0 covers the whole file.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            bail!(
                "dropping the cached pages of {}: {}",
                self.path.display(),
                std::io::Error::from_raw_os_error(rc)
            );
        }
        Ok(())
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        if self.is_device {
            return;
        }
        let filled = self.filled.load(Ordering::SeqCst);
        let ours = self.name_is_ours();
        if self.keep && !filled {
            // A fill cut short (Ctrl-C, ENOSPC, EIO) is not a test file to reuse.
            if ours {
                let _ = std::fs::remove_file(&self.path);
            }
            interrupt::unregister_temporary(&self.path);
            eprintln!(
                "removed the test file {}: its fill did not finish, so --keep does not keep it",
                self.path.display()
            );
        } else if self.keep {
            // Record whether the content can still be checked, for the run that reuses it.
            let _ = write_header(
                &self.handle,
                &self.path,
                &Header {
                    tag: self.tag,
                    data_offset: self.data_offset,
                    data_bytes: self.data_bytes,
                    filled: true,
                    verifiable: self.verifiable(),
                },
            );
            interrupt::unregister_temporary(&self.path);
            eprintln!(
                "kept the test file {} for the next run (--keep)",
                self.path.display()
            );
        } else if self.remove_on_drop && ours {
            let _ = std::fs::remove_file(&self.path);
            interrupt::unregister_temporary(&self.path);
        }
    }
}

/// The header of a test file (text after [`MAGIC`], so `head -c 200` shows it).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Header {
    pub tag: u64,
    pub data_offset: u64,
    pub data_bytes: u64,
    pub filled: bool,
    pub verifiable: bool,
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(
            format!(
                "tag={:016x}\ndata_offset={}\ndata_bytes={}\nfilled={}\nverifiable={}\n\
                 This file was created by peakbench disk and may be deleted.\n",
                self.tag,
                self.data_offset,
                self.data_bytes,
                u8::from(self.filled),
                u8::from(self.verifiable)
            )
            .as_bytes(),
        );
        bytes
    }

    /// Parses a header block; `None` when it is not a peakbench header.
    pub(crate) fn decode(block: &[u8]) -> Option<Header> {
        let rest = block.strip_prefix(MAGIC)?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let text = std::str::from_utf8(&rest[..end]).ok()?;
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
        };
        Some(Header {
            tag: u64::from_str_radix(field("tag")?, 16).ok()?,
            data_offset: field("data_offset")?.parse().ok()?,
            data_bytes: field("data_bytes")?.parse().ok()?,
            filled: field("filled")? == "1",
            verifiable: field("verifiable")? == "1",
        })
    }
}

/// Reads the header of `path`, `None` when the file has none (a file peakbench did not create).
/// Opened read-only, never through a symbolic link and never waiting (a FIFO swapped in for a
/// checked name would block an open forever), and only a regular file is read.
pub(crate) fn read_header(path: &Path) -> Result<Option<Header>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    if !file.metadata()?.file_type().is_file() {
        bail!("{} is not a regular file", path.display());
    }
    Ok(header_of(&file)?)
}

fn write_header(file: &File, path: &Path, header: &Header) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut block = header.encode();
    block.resize(header.data_offset as usize, 0);
    file.write_all_at(&block, 0)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing the header of {}", path.display()))
}

/// O_DIRECT alignment of files in `dir`: the logical block size of the device holding it.
pub(crate) fn alignment(dir: &Path) -> (u64, String) {
    let Ok(meta) = std::fs::metadata(dir) else {
        return (4096, "default (metadata unreadable)".into());
    };
    alignment_of_device(if meta.file_type().is_block_device() {
        meta.rdev()
    } else {
        meta.dev()
    })
}

/// O_DIRECT alignment on the block device numbered `dev`: its logical block size (that of
/// the whole disk for a partition).
pub(crate) fn alignment_of_device(dev: u64) -> (u64, String) {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    for rel in ["queue/logical_block_size", "../queue/logical_block_size"] {
        let path = format!("/sys/dev/block/{major}:{minor}/{rel}");
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(v) = text.trim().parse::<u64>()
            && v.is_power_of_two()
        {
            return (v, path);
        }
    }
    (
        4096,
        format!("default 4096: no logical block size in sysfs for device {major}:{minor}"),
    )
}

/// Free bytes for an unprivileged user, total bytes and whether the file system is read-only.
fn statvfs(dir: &Path) -> std::io::Result<(u64, u64, bool)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: statvfs fills the plain-data struct for a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` a live struct to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok((
        st.f_bavail as u64 * frsize,
        st.f_blocks as u64 * frsize,
        st.f_flag & libc::ST_RDONLY != 0,
    ))
}

/// The space the test file may take in a file system of `total` bytes with `free` available.
pub(crate) fn space_ok(need: u64, free: u64, total: u64) -> bool {
    need.saturating_add(SPACE_MARGIN + total / 100) <= free
}

/// A smaller test file size when `want` does not fit in `dir`: half of what the margin leaves
/// free, in whole MiB; `None` when `want` fits. Too little room for even 64 MiB is an error,
/// and so is a read-only file system, named first (it would refuse any size).
pub(crate) fn fitting_size(dir: &Path, want: u64) -> Result<Option<u64>> {
    let (free, total, read_only) =
        statvfs(dir).map_err(|source| TargetError::FreeSpaceUnknown {
            path: dir.to_path_buf(),
            source,
        })?;
    if read_only {
        return Err(TargetError::ReadOnly {
            path: dir.to_path_buf(),
        }
        .into());
    }
    if space_ok(want + 4096, free, total) {
        return Ok(None);
    }
    let usable = free.saturating_sub(SPACE_MARGIN + total / 100);
    let size = usable / 2 / (1 << 20) * (1 << 20);
    if size < 64 << 20 {
        return Err(TargetError::TooLittleRoom {
            path: dir.to_path_buf(),
            free,
        }
        .into());
    }
    Ok(Some(size))
}

/// Checks a place for the test file without creating anything.
pub(crate) fn check_dir(dir: &Path, data_bytes: u64, align: u64) -> Result<(), TargetError> {
    let path = || dir.to_path_buf();
    let meta = std::fs::metadata(dir).map_err(|source| TargetError::Missing {
        path: path(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(TargetError::NotADirectory { path: path() });
    }
    let (free, total, read_only) =
        statvfs(dir).map_err(|source| TargetError::FreeSpaceUnknown {
            path: path(),
            source,
        })?;
    if read_only {
        return Err(TargetError::ReadOnly { path: path() });
    }
    let need = data_bytes + align.max(4096);
    if !space_ok(need, free, total) {
        return Err(TargetError::NoSpace {
            need,
            path: path(),
            free,
            margin: SPACE_MARGIN,
        });
    }
    // Root ignores permissions, so only a real attempt tells whether the directory is writable.
    let probe = dir.join(format!(
        ".peakbench-probe-{:016x}",
        Rng::from_clock().next_u64()
    ));
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(source) => Err(TargetError::NotWritable {
            path: path(),
            source,
        }),
    }
}

/// A kept peakbench file in `dir` with a data region of exactly `data_bytes`.
pub(crate) fn find_kept(dir: &Path, data_bytes: u64) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("peakbench-") && n.ends_with(".tmp"))
        })
        .filter(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
                && matches!(read_header(p), Ok(Some(h)) if h.filled && h.data_bytes == data_bytes)
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Opens an existing test file, once and by name: never through a symbolic link, never
/// waiting on a FIFO (`O_NONBLOCK`, which a regular file ignores).
fn open_existing(path: &Path) -> Result<File, TargetError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => TargetError::NotRegular {
                path: path.to_path_buf(),
            },
            _ => TargetError::Unreadable {
                path: path.to_path_buf(),
                why: e.to_string(),
            },
        })
}

/// What `stat` must show of a file peakbench writes to: a regular file of the effective user
/// with one link (another link would be written through, under a name peakbench never checked).
fn check_ours(meta: &std::fs::Metadata, path: &Path) -> Result<(), TargetError> {
    let not_ours = |why: String| TargetError::NotOurs {
        path: path.to_path_buf(),
        why,
    };
    if !meta.file_type().is_file() {
        return Err(TargetError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid {
        return Err(not_ours(format!(
            "belongs to uid {}, not to this user (uid {euid})",
            meta.uid()
        )));
    }
    if meta.nlink() != 1 {
        return Err(not_ours(format!(
            "has {} hard links (writes would reach the other names too)",
            meta.nlink()
        )));
    }
    Ok(())
}

/// The header read through an open descriptor.
fn header_of(file: &File) -> std::io::Result<Option<Header>> {
    use std::os::unix::fs::FileExt;
    let mut block = vec![0u8; 512];
    let mut got = 0;
    while got < block.len() {
        let n = file.read_at(&mut block[got..], got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(Header::decode(&block[..got]))
}

/// Checks an existing path meant for the test file: only a complete peakbench file of this
/// user, with one link, may be reused.
pub(crate) fn check_existing_file(path: &Path) -> Result<Header, TargetError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| TargetError::Missing {
        path: path.to_path_buf(),
        source,
    })?;
    check_ours(&meta, path)?;
    match read_header(path) {
        Ok(Some(h)) if h.filled => Ok(h),
        Ok(_) => Err(TargetError::Foreign {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(TargetError::Unreadable {
            path: path.to_path_buf(),
            why: format!("{e:#}"),
        }),
    }
}

/// The data region starts here: a whole header block, aligned for O_DIRECT.
pub(crate) fn data_offset(align: u64) -> u64 {
    align.max(4096)
}

/// Opens (creating and filling if needed) the test file described by `spec`.
pub(crate) fn open(spec: &TargetSpec) -> Result<TestFile> {
    match &spec.place {
        Place::Device(device) => {
            // The held descriptor, after checking that the name still refers to its device.
            let handle = device.descriptor()?;
            let file = TestFile {
                path: device.path.clone(),
                handle,
                data_offset: 0,
                data_bytes: spec.data_bytes,
                tag: Rng::from_clock().next_u64(),
                align: spec.align,
                is_device: true,
                foreign_writes: AtomicBool::new(false),
                remove_on_drop: false,
                keep: false,
                filled: AtomicBool::new(false),
            };
            fill(&file, spec.direct_fill)?;
            Ok(file)
        }
        Place::File(path) if path.exists() => reuse(path, spec),
        Place::File(path) => create(path.clone(), spec),
        Place::Dir(dir) => {
            if spec.keep
                && let Some(path) = find_kept(dir, spec.data_bytes)
            {
                let file = reuse(&path, spec)?;
                eprintln!("reusing the kept test file {}", path.display());
                return Ok(file);
            }
            let name = format!("peakbench-{:016x}.tmp", Rng::from_clock().next_u64());
            create(dir.join(name), spec)
        }
    }
}

fn reuse(path: &Path, spec: &TargetSpec) -> Result<TestFile> {
    let handle = open_existing(path)?;
    let meta = handle.metadata().map_err(|e| TargetError::Unreadable {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    check_ours(&meta, path)?;
    let header = match header_of(&handle) {
        Ok(Some(h)) if h.filled => h,
        Ok(_) => {
            return Err(TargetError::Foreign {
                path: path.to_path_buf(),
            }
            .into());
        }
        Err(e) => {
            return Err(TargetError::Unreadable {
                path: path.to_path_buf(),
                why: e.to_string(),
            }
            .into());
        }
    };
    if meta.len() < header.data_offset.saturating_add(header.data_bytes) {
        return Err(TargetError::NotOurs {
            path: path.to_path_buf(),
            why: format!(
                "is {} B long, shorter than its header says ({} B)",
                meta.len(),
                header.data_offset.saturating_add(header.data_bytes)
            ),
        }
        .into());
    }
    if header.data_bytes < spec.data_bytes || header.data_offset % spec.align != 0 {
        return Err(TargetError::TooSmall {
            path: path.to_path_buf(),
            has: header.data_bytes,
            need: spec.data_bytes,
        }
        .into());
    }
    interrupt::register_temporary(path, &handle);
    Ok(TestFile {
        path: path.to_path_buf(),
        handle,
        data_offset: header.data_offset,
        data_bytes: spec.data_bytes,
        tag: header.tag,
        align: spec.align,
        is_device: false,
        foreign_writes: AtomicBool::new(!header.verifiable),
        remove_on_drop: true,
        keep: spec.keep,
        filled: AtomicBool::new(true),
    })
}

fn create(path: PathBuf, spec: &TargetSpec) -> Result<TestFile> {
    // O_EXCL: a name that exists (a planted symbolic link included) is never opened.
    let handle = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .with_context(|| format!("creating the test file {}", path.display()))?;
    interrupt::register_temporary(&path, &handle);
    // From here on, Drop removes the file whatever goes wrong.
    let file = TestFile {
        path,
        handle,
        data_offset: data_offset(spec.align),
        data_bytes: spec.data_bytes,
        tag: Rng::from_clock().next_u64(),
        align: spec.align,
        is_device: false,
        foreign_writes: AtomicBool::new(false),
        remove_on_drop: true,
        keep: spec.keep,
        filled: AtomicBool::new(false),
    };
    let (tag, data_offset, data_bytes) = (file.tag, file.data_offset, file.data_bytes);
    let header = |filled| Header {
        tag,
        data_offset,
        data_bytes,
        filled,
        verifiable: true,
    };
    check_ours(
        &file
            .handle
            .metadata()
            .context("fstat of the new test file")?,
        &file.path,
    )?;
    write_header(&file.handle, &file.path, &header(false))?;
    fill(&file, spec.direct_fill)?;
    write_header(&file.handle, &file.path, &header(true))?;
    file.filled.store(true, Ordering::SeqCst);
    Ok(file)
}

/// Writes pseudo-random data with offset stamps over the whole data region.
fn fill(file: &TestFile, direct: bool) -> Result<()> {
    use std::os::unix::fs::FileExt;
    // Derived from the one descriptor: O_DIRECT needs a new open of the same inode.
    let handle = if direct {
        file.reopen(true, true)?
    } else {
        file.handle
            .try_clone()
            .with_context(|| format!("opening {} to fill it", file.path.display()))?
    };
    let mut buf = AlignedBuf::new(FILL_CHUNK, file.align.max(4096) as usize)?;
    let mut rng = Rng::from_clock();
    let mut done = 0u64;
    while done < file.data_bytes {
        if interrupt::requested() {
            return Err(interrupt::Interrupted.into());
        }
        let mut len = (file.data_bytes - done).min(FILL_CHUNK as u64) as usize;
        if direct {
            len = len.div_ceil(file.align as usize) * file.align as usize;
        }
        let offset = file.data_offset + done;
        let chunk = &mut buf.as_mut_slice()[..len];
        rng.fill(chunk);
        stamp(chunk, offset, file.tag, 0);
        handle
            .write_all_at(chunk, offset)
            .map_err(|e| io_error(e, "filling the test file", offset))?;
        done += len as u64;
    }
    handle
        .sync_all()
        .with_context(|| format!("syncing {}", file.path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_foreign_bytes_are_not_headers() {
        let h = Header {
            tag: 0xdead_beef_0123_4567,
            data_offset: 4096,
            data_bytes: 1 << 20,
            filled: true,
            verifiable: false,
        };
        let mut block = h.encode();
        block.resize(4096, 0);
        assert_eq!(Header::decode(&block), Some(h));
        assert_eq!(Header::decode(b"PEAKBENCH DISK TEST FILE v0\ntag=1"), None);
        assert_eq!(Header::decode(&[0u8; 4096]), None);
    }

    /// A name checked as a regular file and then swapped for a FIFO or a symbolic link (a
    /// shared directory, `--keep`): reading its header returns at once with an error; opening
    /// the FIFO by name blocked forever.
    #[test]
    fn a_fifo_or_a_link_at_a_checked_name_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("peakbench-0000000000000001.tmp");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || tx.send(read_header(&path).is_err()));
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(5)),
            Ok(true),
            "reading a FIFO's header blocked or succeeded"
        );
        let target = dir.path().join("target");
        let mut header = Header {
            tag: 1,
            data_offset: 4096,
            data_bytes: 4096,
            filled: true,
            verifiable: true,
        }
        .encode();
        header.resize(8192, 0);
        std::fs::write(&target, &header).unwrap();
        assert!(read_header(&target).unwrap().is_some());
        let link = dir.path().join("peakbench-0000000000000002.tmp");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(read_header(&link).is_err(), "a link was followed");
    }

    #[test]
    fn space_keeps_a_margin() {
        assert!(space_ok(1 << 30, 10 << 30, 20 << 30));
        assert!(!space_ok(1 << 30, (1 << 30) + (1 << 20), 2 << 30));
    }

    /// A buffered-fill, not-kept test file of `data_bytes` in `dir`.
    fn spec_in(dir: &Path, data_bytes: u64) -> TargetSpec {
        TargetSpec {
            place: Place::Dir(dir.to_path_buf()),
            data_bytes,
            align: 4096,
            align_source: "test".into(),
            keep: false,
            direct_fill: false,
        }
    }

    #[test]
    fn a_file_is_created_filled_and_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let file = open(&spec_in(dir.path(), 3 << 20)).unwrap();
        let bytes = std::fs::read(&file.path).unwrap();
        assert_eq!(bytes.len() as u64, file.data_offset + (3 << 20));
        assert!(bytes.starts_with(MAGIC));
        assert!(super::super::stamp::verify(&bytes[4096..], 4096, file.tag).unwrap() > 0);
        let zeros = bytes[4096..].iter().filter(|&&b| b == 0).count();
        assert!(zeros < bytes.len() / 100, "{zeros} zero bytes: not random");
        let path = file.path.clone();
        drop(file);
        assert!(!path.exists());
    }

    /// Pages of `path` in the page cache (mincore on a mapping that is never touched).
    fn cached_pages(path: &Path) -> usize {
        use std::os::fd::AsRawFd;
        let file = File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        let page = 4096;
        // SAFETY: a read-only shared mapping of an open file, only passed to mincore and unmapped.
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(map, libc::MAP_FAILED);
            let mut resident = vec![0u8; len.div_ceil(page)];
            assert_eq!(libc::mincore(map, len, resident.as_mut_ptr()), 0);
            libc::munmap(map, len);
            resident.iter().filter(|&&r| r & 1 != 0).count()
        }
    }

    #[test]
    fn cached_pages_are_dropped_before_a_case() {
        // Under the build directory, which is on a disk: a tmpfs keeps its pages whatever the
        // advice, since they are its storage.
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        std::fs::create_dir_all(&target).unwrap();
        let dir = tempfile::tempdir_in(&target).unwrap();
        let file = open(&spec_in(dir.path(), 4 << 20)).unwrap();
        std::fs::read(&file.path).unwrap();
        let before = cached_pages(&file.path);
        assert!(
            before > 1000,
            "only {before} pages cached after reading the file"
        );
        file.drop_cached_pages().unwrap();
        let after = cached_pages(&file.path);
        assert_eq!(after, 0, "{after} of {before} pages still cached");
    }
}
