//! A block device given with `--file DEV --allow-device-write DEV`: checked, then held.
//!
//! The device is opened once, with `O_EXCL`, before any check, and that descriptor is held
//! until the end of the run: the kernel refuses an exclusive open of a device that is mounted
//! or claimed by md, dm (LVM, LUKS), btrfs, bcache or swap, and while peakbench holds it none
//! of them can claim it. Every check then looks at the device behind the held descriptor (its
//! device number from `fstat`, its content read through it), every later descriptor is derived
//! from it, and before the fill the name must still refer to the same device number.
//!
//! Signatures are looked for with libblkid, through `wipefs --no-act` run on the held
//! descriptor (`/proc/self/fd/N`): it probes every file system, RAID, volume manager and
//! partition table libblkid knows, at both ends of the device (a GPT backup header in the last
//! sector, md 0.90 and 1.0 superblocks near the end), including ones whose checksum is bad.
//! Only where `wipefs` cannot be run at all does peakbench fall back to its own short list
//! ([`signature_in`], [`tail_signature_in`]), and it says so in every result.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::error::TargetError;
use crate::reference;

/// How long `wipefs` may take to probe a device.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A block device peakbench checked and holds open with `O_EXCL` until the run ends.
#[derive(Debug)]
pub(crate) struct HeldDevice {
    /// The name the user gave (shown; checked again before the fill, never written through).
    pub path: PathBuf,
    /// The exclusive descriptor every other one is derived from.
    file: File,
    /// The device number it had when it was checked.
    pub rdev: u64,
    /// Bytes of the device.
    pub bytes: u64,
    /// Set when libblkid could not be run and peakbench's own short list was used: why.
    pub probe_note: Option<String>,
}

impl HeldDevice {
    /// A new descriptor of the held device (sharing its open file, so its exclusive claim),
    /// after checking that the held descriptor is still a block device with the checked number
    /// and that `path` still names that device.
    pub(crate) fn descriptor(&self) -> Result<File, TargetError> {
        let refuse = |why: String| TargetError::DeviceInUse {
            path: self.path.clone(),
            why,
        };
        let held = self
            .file
            .metadata()
            .map_err(|e| refuse(format!("cannot be read ({e})")))?;
        if !held.file_type().is_block_device() || held.rdev() != self.rdev {
            return Err(refuse("is no longer the device that was checked".into()));
        }
        match std::fs::metadata(&self.path) {
            Ok(now) if now.file_type().is_block_device() && now.rdev() == self.rdev => {}
            Ok(now) => {
                return Err(refuse(format!(
                    "no longer names the device that was checked ({}, now {})",
                    device_number(self.rdev),
                    if now.file_type().is_block_device() {
                        device_number(now.rdev())
                    } else {
                        "not a block device".into()
                    }
                )));
            }
            Err(e) => return Err(refuse(format!("is gone ({e})"))),
        }
        self.file
            .try_clone()
            .map_err(|e| refuse(format!("cannot be reopened ({e})")))
    }
}

/// `major:minor` of a device number.
fn device_number(rdev: u64) -> String {
    format!("device {}:{}", libc::major(rdev), libc::minor(rdev))
}

/// Checks a block device the user allowed to be written and holds it: opened with `O_EXCL`
/// (so neither mounted nor claimed by md, dm, btrfs or swap, now or later in the run), without
/// partitions, and blank (no signature libblkid knows, at either end).
pub(crate) fn check_device(path: &Path, allowed: Option<&Path>) -> Result<HeldDevice, TargetError> {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let allowed_canonical = allowed.map(|a| std::fs::canonicalize(a).unwrap_or(a.to_path_buf()));
    if allowed_canonical.as_deref() != Some(canonical.as_path()) {
        return Err(TargetError::DeviceNotAllowed {
            path: path.to_path_buf(),
        });
    }
    let refuse = |why: String| TargetError::DeviceInUse {
        path: path.to_path_buf(),
        why,
    };
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&canonical)
    {
        Ok(file) => file,
        Err(e) => {
            // Say what holds it where /proc and /sys tell (a kernel that forbids writes to
            // mounted devices answers EPERM rather than EBUSY); the kernel's refusal is the proof.
            let held = std::fs::metadata(&canonical)
                .ok()
                .filter(|m| m.file_type().is_block_device())
                .and_then(|m| in_use(m.rdev(), &canonical));
            return Err(refuse(match (held, e.raw_os_error()) {
                (Some(why), _) => why,
                (None, Some(libc::EBUSY)) => "is in use: the kernel refuses to open it \
                                              exclusively (it is mounted, or held by md, dm, \
                                              LVM, btrfs, swap or another program)"
                    .into(),
                (None, _) => format!("cannot be opened ({e})"),
            }));
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| refuse(format!("cannot be read ({e})")))?;
    if !meta.file_type().is_block_device() {
        return Err(refuse("is not a block device".into()));
    }
    let rdev = meta.rdev();
    if let Some(why) = in_use(rdev, &canonical) {
        return Err(refuse(why));
    }
    let bytes = bytes_of(&file).map_err(|e| refuse(format!("has no readable size ({e})")))?;
    let probe_note = match probe(&file) {
        Probe::Blank => None,
        Probe::Found(what) => return Err(refuse(format!("holds {what}"))),
        Probe::Failed(why) => {
            return Err(refuse(format!("cannot be probed for signatures: {why}")));
        }
        Probe::Unavailable(why) => {
            if let Some(what) = fallback_signature(&file, bytes)
                .map_err(|e| refuse(format!("cannot be read ({e})")))?
            {
                return Err(refuse(format!("holds {what}")));
            }
            Some(format!(
                "wipefs (util-linux) could not be run ({why}): the device was checked against \
                 peakbench's own short list of signatures only (its first 256 KiB, and a GPT \
                 backup and md superblocks at its end); install util-linux for libblkid's probe"
            ))
        }
    };
    Ok(HeldDevice {
        path: path.to_path_buf(),
        file,
        rdev,
        bytes,
        probe_note,
    })
}

/// Why the device `rdev` is in use, as /sys and /proc show it: partitions, holders (md, dm),
/// a mount or swap.
fn in_use(rdev: u64, canonical: &Path) -> Option<String> {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if let Ok(entries) = std::fs::read_dir(&sys) {
        for entry in entries.flatten() {
            if entry.path().join("partition").exists() {
                return Some(format!(
                    "has partitions ({}…)",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    if let Ok(holders) = std::fs::read_dir(sys.join("holders")) {
        let names: Vec<String> = holders
            .flatten()
            .map(|h| h.file_name().to_string_lossy().into_owned())
            .collect();
        if !names.is_empty() {
            return Some(format!("is held by {} (md, dm, LVM)", names.join(", ")));
        }
    }
    let device = format!("{major}:{minor}");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines() {
        let mut fields = line.split_whitespace();
        if fields.nth(2) == Some(device.as_str()) {
            let point = fields.nth(1).unwrap_or("?");
            return Some(format!("is mounted on {point}"));
        }
    }
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    let name = canonical.display().to_string();
    if swaps
        .lines()
        .any(|l| l.split_whitespace().next() == Some(&name))
    {
        return Some("is in use as swap".into());
    }
    None
}

/// Bytes of the block device open as `file`.
pub(crate) fn bytes_of(file: &File) -> std::io::Result<u64> {
    let mut bytes: u64 = 0;
    // BLKGETSIZE64 = _IOR(0x12, 114, size_t)
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    // SAFETY: the ioctl writes one u64 into `bytes`.
    if unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut bytes) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(bytes)
}

/// What the signature probe found.
#[derive(Debug, PartialEq)]
enum Probe {
    Blank,
    /// The signatures found, described.
    Found(String),
    /// wipefs ran and failed, or ran too long: the device is not known to be blank.
    Failed(String),
    /// wipefs is not installed or cannot be started.
    Unavailable(String),
}

/// Probes the held device with libblkid through `wipefs --no-act` (it reads only, and opens
/// the device without `O_EXCL`, so it works beside peakbench's claim).
fn probe(file: &File) -> Probe {
    let Some(wipefs) = [
        "/usr/sbin/wipefs",
        "/sbin/wipefs",
        "/usr/bin/wipefs",
        "/bin/wipefs",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
    .or_else(|| reference::find_program("wipefs")) else {
        return Probe::Unavailable("no wipefs on PATH or in /usr/sbin".into());
    };
    let fd = match reference::dup_for_child(file.as_fd()) {
        Ok(fd) => fd,
        Err(e) => return Probe::Unavailable(format!("cannot pass the device to it: {e}")),
    };
    let mut cmd = Command::new(&wipefs);
    cmd.args(["--no-act", "--json", "--output", "TYPE,OFFSET,USAGE"])
        .arg(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .env("LC_ALL", "C");
    reference::inherit_fd(&mut cmd, fd.as_raw_fd());
    let output = match reference::run_for_at_most(&mut cmd, "wipefs", PROBE_TIMEOUT) {
        Ok(output) => output,
        Err(why) if why.starts_with("cannot start") => return Probe::Unavailable(why),
        Err(why) => return Probe::Failed(why),
    };
    drop(fd);
    if !output.status.success() {
        return Probe::Failed(format!(
            "wipefs failed ({}): {}",
            output.status,
            printable(output.stderr.lines().last().unwrap_or("").trim())
        ));
    }
    match parse_wipefs(&output.stdout) {
        Some(found) if found.is_empty() => Probe::Blank,
        Some(found) => Probe::Found(found.join(", ")),
        None => Probe::Failed("wipefs printed no JSON list of signatures".into()),
    }
}

/// The signatures of `wipefs --json --output TYPE,OFFSET,USAGE`, described ("a gpt
/// partition-table signature at byte 16776704"); `None` when it is not that document.
fn parse_wipefs(stdout: &str) -> Option<Vec<String>> {
    let doc: serde_json::Value = serde_json::from_str(stdout).ok()?;
    let list = doc.get("signatures")?.as_array()?;
    Some(
        list.iter()
            .map(|s| {
                let text = |key: &str| s.get(key).and_then(|v| v.as_str()).unwrap_or("?");
                let offset = text("offset");
                let at = offset
                    .strip_prefix("0x")
                    .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                    .map_or(offset.to_string(), |b| b.to_string());
                format!(
                    "a {} {} signature at byte {at} (found by wipefs)",
                    printable(text("type")),
                    printable(text("usage"))
                )
            })
            .collect(),
    )
}

/// `text` with anything but printable ASCII replaced: labels and types come from the device.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// peakbench's own short list, for where libblkid cannot be run: the first 256 KiB and the
/// last 128 KiB of the device.
fn fallback_signature(file: &File, bytes: u64) -> std::io::Result<Option<String>> {
    let head = read_at_most(file, 0, 256 * 1024)?;
    if let Some(what) = signature_in(&head) {
        return Ok(Some(what.into()));
    }
    let tail_len = bytes.min(128 * 1024);
    let tail = read_at_most(file, bytes - tail_len, tail_len as usize)?;
    Ok(tail_signature_in(&tail, bytes).map(str::to_string))
}

fn read_at_most(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[got..], offset + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// Signatures that mark a device as holding data: (name, offset, bytes).
const SIGNATURES: &[(&str, usize, &[u8])] = &[
    ("an MBR partition table or boot sector", 510, &[0x55, 0xAA]),
    ("a GPT partition table", 512, b"EFI PART"),
    ("a GPT partition table", 4096, b"EFI PART"),
    ("an ext2/3/4 file system", 1080, &[0x53, 0xEF]),
    ("an XFS file system", 0, b"XFSB"),
    ("a btrfs file system", 65600, b"_BHRfS_M"),
    ("swap", 4086, b"SWAPSPACE2"),
    ("swap", 4086, b"SWAP-SPACE"),
    ("a LUKS volume", 0, b"LUKS\xba\xbe"),
    ("an LVM physical volume", 536, b"LVM2 001"),
    ("an NTFS file system", 3, b"NTFS    "),
    ("an ISO 9660 file system", 32769, b"CD001"),
    ("a squashfs file system", 0, b"hsqs"),
    ("an F2FS file system", 1024, &[0x10, 0x20, 0xF5, 0xF2]),
    ("a bcache device", 4120, &[0xc6, 0x85, 0x73, 0xf6]),
    ("a ZFS label", 16384 + 128 * 1024, &[0x0c, 0xb1, 0xba, 0x00]),
    ("an md 1.1 RAID member", 0, &[0xfc, 0x4e, 0x2b, 0xa9]),
    ("an md 1.2 RAID member", 4096, &[0xfc, 0x4e, 0x2b, 0xa9]),
];

/// The first signature found in the first bytes of a device, if any.
pub(crate) fn signature_in(head: &[u8]) -> Option<&'static str> {
    SIGNATURES.iter().find_map(|(name, offset, bytes)| {
        (head.len() >= offset + bytes.len() && &head[*offset..offset + bytes.len()] == *bytes)
            .then_some(*name)
    })
}

/// The md superblock magic, as little-endian bytes.
const MD_MAGIC: u32 = 0xa92b_4efc;

/// A signature in `tail`, the last bytes of a device of `size` bytes: a GPT backup header in
/// the last 512 B or 4 KiB sector, an md 0.90 superblock (64 KiB-aligned, 64 KiB from the end,
/// either byte order) or an md 1.0 one (4 KiB-aligned, 8 KiB from the end).
pub(crate) fn tail_signature_in(tail: &[u8], size: u64) -> Option<&'static str> {
    let start = size.checked_sub(tail.len() as u64)?;
    let at = |offset: u64, len: usize| -> Option<&[u8]> {
        let from = usize::try_from(offset.checked_sub(start)?).ok()?;
        tail.get(from..from.checked_add(len)?)
    };
    for sector in [512, 4096] {
        if size >= sector && at(size - sector, 8) == Some(b"EFI PART".as_slice()) {
            return Some("a GPT backup header (in the last sector)");
        }
    }
    let word = |bytes: &[u8]| u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4]));
    if size > 0x10000
        && let Some(sb) = at((size & !0xffff) - 0x10000, 4)
        && (word(sb) == MD_MAGIC || word(sb).swap_bytes() == MD_MAGIC)
    {
        return Some("an md 0.90 RAID superblock (at the end)");
    }
    if size > 0x2000
        && let Some(sb) = at((size & !0xfff) - 0x2000, 8)
        && word(&sb[..4]) == MD_MAGIC
        && word(&sb[4..]) == 1
    {
        return Some("an md 1.0 RAID superblock (at the end)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_found_where_they_live() {
        let mut head = vec![0u8; 70_000];
        assert_eq!(signature_in(&head), None);
        head[1080] = 0x53;
        head[1081] = 0xEF;
        assert_eq!(signature_in(&head), Some("an ext2/3/4 file system"));
        let mut gpt = vec![0u8; 8192];
        gpt[512..520].copy_from_slice(b"EFI PART");
        assert_eq!(signature_in(&gpt), Some("a GPT partition table"));
    }

    #[test]
    fn the_fallback_looks_at_the_end_of_the_device_too() {
        let size: u64 = (16 << 20) + 3 * 4096;
        let mut tail = vec![0u8; 128 * 1024];
        let start = size - tail.len() as u64;
        assert_eq!(tail_signature_in(&tail, size), None);
        let gpt = (size - 512 - start) as usize;
        tail[gpt..gpt + 8].copy_from_slice(b"EFI PART");
        assert_eq!(
            tail_signature_in(&tail, size),
            Some("a GPT backup header (in the last sector)")
        );
        tail.fill(0);
        let md10 = ((size & !0xfff) - 0x2000 - start) as usize;
        tail[md10..md10 + 4].copy_from_slice(&MD_MAGIC.to_le_bytes());
        tail[md10 + 4..md10 + 8].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(
            tail_signature_in(&tail, size),
            Some("an md 1.0 RAID superblock (at the end)")
        );
        tail.fill(0);
        let md090 = ((size & !0xffff) - 0x10000 - start) as usize;
        tail[md090..md090 + 4].copy_from_slice(&MD_MAGIC.to_be_bytes());
        assert_eq!(
            tail_signature_in(&tail, size),
            Some("an md 0.90 RAID superblock (at the end)")
        );
        // A device smaller than the tail read, and an empty one.
        assert_eq!(tail_signature_in(&[0u8; 100], 100), None);
        assert_eq!(tail_signature_in(&[], 0), None);
    }

    /// Loop devices over zeroed images, detached when dropped.
    struct Loops(Vec<String>);

    impl Drop for Loops {
        fn drop(&mut self) {
            for dev in &self.0 {
                let _ = Command::new("losetup").args(["-d", dev]).status();
            }
        }
    }

    /// `n` blank 4 MiB loop devices, or why this machine cannot make them (a skip, or a
    /// failure in CI's strict mode).
    fn blank_loops(dir: &Path, n: usize) -> Option<Loops> {
        let mut loops = Loops(Vec::new());
        for i in 0..n {
            let image = dir.join(format!("{i}.img"));
            std::fs::write(&image, vec![0u8; 4 << 20]).unwrap();
            let out = Command::new("losetup")
                .args(["--find", "--show"])
                .arg(&image)
                .output();
            match out {
                Ok(out) if out.status.success() => loops
                    .0
                    .push(String::from_utf8_lossy(&out.stdout).trim().to_string()),
                _ if std::env::var_os("PEAKBENCH_STRICT_TESTS").is_some_and(|v| v == "1") => {
                    panic!("strict mode: cannot attach a loop device (root and losetup needed)")
                }
                _ => {
                    eprintln!("skipped: cannot attach a loop device (root and losetup needed)");
                    return None;
                }
            }
        }
        Some(loops)
    }

    /// The device is held with O_EXCL (nothing else can claim it), and a name that refers to
    /// another device by the time of the fill is refused.
    #[test]
    fn a_held_device_is_exclusive_and_a_name_moved_to_another_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let Some(loops) = blank_loops(dir.path(), 2) else {
            return;
        };
        let name = dir.path().join("by-id");
        std::os::unix::fs::symlink(&loops.0[0], &name).unwrap();
        let held = check_device(&name, Some(&name)).unwrap();
        assert!(held.descriptor().is_ok());
        let again = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL)
            .open(&loops.0[0]);
        assert_eq!(
            again.map(drop).map_err(|e| e.raw_os_error()),
            Err(Some(libc::EBUSY)),
            "another exclusive open succeeded while peakbench held the device"
        );
        let refused = check_device(&name, Some(&name)).unwrap_err().to_string();
        assert!(
            refused.contains("refuses to open it exclusively"),
            "{refused}"
        );

        std::fs::remove_file(&name).unwrap();
        std::os::unix::fs::symlink(&loops.0[1], &name).unwrap();
        let moved = held.descriptor().unwrap_err().to_string();
        assert!(
            moved.contains("no longer names the device that was checked"),
            "{moved}"
        );
        drop(held);
        // Released with the run: the device can be claimed again.
        let first = Path::new(&loops.0[0]);
        assert!(check_device(first, Some(first)).is_ok());
    }

    #[test]
    fn wipefs_json_is_read_into_descriptions() {
        let text = r#"{
   "signatures": [
      {"type": "linux_raid_member", "offset": "0xffe000", "usage": "raid"},
      {"type": "gpt", "offset": "0xfffe00", "usage": "partition-table"}
   ]
}"#;
        assert_eq!(
            parse_wipefs(text).unwrap(),
            [
                "a linux_raid_member raid signature at byte 16769024 (found by wipefs)",
                "a gpt partition-table signature at byte 16776704 (found by wipefs)"
            ]
        );
        assert_eq!(parse_wipefs("{\"signatures\": [\n\n]}\n"), Some(Vec::new()));
        assert_eq!(parse_wipefs(""), None);
        assert_eq!(parse_wipefs("wipefs: error"), None);
        let hostile = r#"{"signatures":[{"type":"x\u001b[2J","offset":"0x0","usage":"y"}]}"#;
        assert!(!parse_wipefs(hostile).unwrap()[0].contains('\u{1b}'));
    }
}
