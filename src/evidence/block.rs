//! Block devices: each one's queue, and the whole disk a file is on.
//!
//! Everything comes from sysfs: `/sys/block/NAME` for every whole device (its `dev`, `queue/`,
//! `slaves/` and `device/`), and `/sys/dev/block/MAJOR:MINOR` to go from the device number a
//! file's `stat` gives to its device, and from a partition to the disk it is part of.

use std::path::{Path, PathBuf};

use super::procstat::{bracketed, read_trimmed};
use super::{BlockQueue, PcieLink, Read};

/// Every block device of `/sys/block` with its queue, what it is and what it sits on.
pub(super) fn read_block_devices() -> Vec<BlockQueue> {
    read_block_devices_at(Path::new("/sys/block"))
}

/// [`read_block_devices`] from the directory `sys_block`, sorted by name.
fn read_block_devices_at(sys_block: &Path) -> Vec<BlockQueue> {
    let Ok(entries) = std::fs::read_dir(sys_block) else {
        return Vec::new();
    };
    let mut devices: Vec<BlockQueue> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_string();
            read_block_device(&entry.path(), name)
        })
        .collect();
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    devices
}

/// One device of `/sys/block` (`dir` is `/sys/block/NAME`); `None` without a `dev` file.
fn read_block_device(dir: &Path, name: String) -> Option<BlockQueue> {
    let file = |path: &str| read_trimmed(&dir.join(path).to_string_lossy());
    let device = file("dev")?;
    let mut below: Vec<String> = std::fs::read_dir(dir.join("slaves"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    below.sort();
    let driver = std::fs::read_link(dir.join("device/driver"))
        .ok()
        .and_then(|link| Some(link.file_name()?.to_string_lossy().into_owned()));
    Some(BlockQueue {
        kind: kind_of(&name, driver.as_deref()),
        device,
        nr_requests: file("queue/nr_requests").and_then(|n| n.parse().ok()),
        scheduler: file("queue/scheduler").and_then(|s| scheduler_in_use(&s)),
        write_cache: file("queue/write_cache"),
        rotational: file("queue/rotational").and_then(|r| match r.as_str() {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        }),
        below,
        link: pcie_link(dir),
        name,
    })
}

/// The scheduler in use: the bracketed one of `queue/scheduler` ("none [mq-deadline] kyber"),
/// or `none` when the file lists only "none" (a device that cannot have one, e.g. device-mapper
/// on some kernels).
fn scheduler_in_use(text: &str) -> Option<String> {
    bracketed(text).or_else(|| (text.trim() == "none").then(|| "none".to_string()))
}

/// What a device is, from its name (the kernel's naming is fixed per driver), else the name of
/// its driver (`device/driver`).
fn kind_of(name: &str, driver: Option<&str>) -> Option<String> {
    const BY_PREFIX: [(&str, &str); 10] = [
        ("loop", "loop"),
        ("dm-", "device-mapper"),
        ("md", "md"),
        ("nvme", "nvme"),
        ("vd", "virtio"),
        ("sd", "scsi"),
        ("zram", "zram"),
        ("nbd", "nbd"),
        ("mmcblk", "mmc"),
        ("xvd", "xen"),
    ];
    BY_PREFIX
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, kind)| kind.to_string())
        .or_else(|| driver.map(str::to_string))
}

/// The PCIe link of an NVMe device: the PCI function's `current_link_speed`, `max_link_speed`,
/// `current_link_width` and `max_link_width`, found at `device/device/` (the namespace's
/// controller's PCI device) or `device/`.
fn pcie_link(dir: &Path) -> Option<PcieLink> {
    ["device/device", "device"].into_iter().find_map(|sub| {
        let pci = dir.join(sub);
        let file = |name: &str| read_trimmed(&pci.join(name).to_string_lossy());
        Some(PcieLink {
            current_speed: file("current_link_speed")?,
            max_speed: file("max_link_speed")?,
            current_width: file("current_link_width")?.parse().ok()?,
            max_width: file("max_link_width")?.parse().ok()?,
        })
    })
}

/// `major:minor` of the whole disk under the file or directory `path` (its directory, when the
/// file is gone).
pub(super) fn device_of_path(path: &str) -> Option<Read<String>> {
    use std::os::unix::fs::MetadataExt;
    let asked = Path::new(path);
    let (stated, metadata) = match std::fs::metadata(asked) {
        Ok(metadata) => (asked.to_path_buf(), metadata),
        Err(_) => {
            let parent = match asked.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let metadata = std::fs::metadata(&parent).ok()?;
            (parent, metadata)
        }
    };
    let dev = metadata.dev() as libc::dev_t;
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    // Major 0: an anonymous device (tmpfs, overlay, proc, btrfs subvolumes), no block device.
    if major == 0 {
        return None;
    }
    let number = format!("{major}:{minor}");
    let stat = format!("stat({}): st_dev {number}", stated.display());
    Some(whole_disk(Path::new("/sys/dev/block"), &number, &stat))
}

/// The whole disk of the device `number` (`major:minor`), with `stat` (how the number was
/// found) and the way to the disk as its source; the number itself when sysfs does not know it.
fn whole_disk(sys_dev_block: &Path, number: &str, stat: &str) -> Read<String> {
    let Ok(dir) = std::fs::canonicalize(sys_dev_block.join(number)) else {
        return Read::new(
            number.to_string(),
            format!("{stat} (not in {})", sys_dev_block.display()),
        );
    };
    let name = |dir: &Path| {
        dir.file_name()
            .map_or_else(|| "?".to_string(), |n| n.to_string_lossy().into_owned())
    };
    if dir.join("partition").exists()
        && let Some(disk) = dir.parent()
        && let Some(disk_number) = read_trimmed(&disk.join("dev").to_string_lossy())
    {
        return Read::new(
            disk_number.clone(),
            format!("{stat}, a partition of {} ({disk_number})", name(disk)),
        );
    }
    Read::new(number.to_string(), format!("{stat} ({})", name(&dir)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs under the system's temporary directory, removed when dropped.
    struct FakeSys(PathBuf);

    impl FakeSys {
        fn new(name: &str) -> FakeSys {
            let dir = std::env::temp_dir().join(format!(
                "peakbench-evidence-block-{name}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            FakeSys(dir)
        }

        fn write(&self, path: &str, text: &str) {
            let path = self.0.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn link(&self, path: &str, target: &str) {
            let path = self.0.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, path).unwrap();
        }
    }

    impl Drop for FakeSys {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn devices_queues_kinds_and_links() {
        let sys = FakeSys::new("devices");
        let nvme = "devices/pci/nvme0/nvme0n1";
        sys.write(&format!("{nvme}/dev"), "259:0\n");
        sys.write(&format!("{nvme}/queue/nr_requests"), "1023\n");
        sys.write(&format!("{nvme}/queue/scheduler"), "[none] mq-deadline\n");
        sys.write(&format!("{nvme}/queue/write_cache"), "write back\n");
        sys.write(&format!("{nvme}/queue/rotational"), "0\n");
        sys.write(
            "devices/pci/0000:01:00.0/current_link_speed",
            "8.0 GT/s PCIe\n",
        );
        sys.write(
            "devices/pci/0000:01:00.0/max_link_speed",
            "16.0 GT/s PCIe\n",
        );
        sys.write("devices/pci/0000:01:00.0/current_link_width", "4\n");
        sys.write("devices/pci/0000:01:00.0/max_link_width", "4\n");
        sys.link(&format!("{nvme}/device"), "../../nvme0");
        sys.link("devices/pci/nvme0/device", "../0000:01:00.0");
        sys.link("block/nvme0n1", &format!("../{nvme}"));
        sys.write("devices/virtual/dm-0/dev", "253:0\n");
        sys.write("devices/virtual/dm-0/queue/scheduler", "none\n");
        sys.write("devices/virtual/dm-0/slaves/nvme0n1p2", "");
        sys.write("devices/virtual/dm-0/slaves/nvme0n1p1", "");
        sys.link("block/dm-0", "../devices/virtual/dm-0");
        sys.write("devices/virtual/odd/dev", "240:0\n");
        sys.link("devices/virtual/odd/device/driver", "../../drivers/rbd");
        sys.link("block/rbd0", "../devices/virtual/odd");
        sys.write("devices/virtual/nodev/queue/scheduler", "none\n");
        sys.link("block/nodev", "../devices/virtual/nodev");

        let devices = read_block_devices_at(&sys.0.join("block"));
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["dm-0", "nvme0n1", "rbd0"]);
        assert_eq!(
            devices[1],
            BlockQueue {
                name: "nvme0n1".into(),
                device: "259:0".into(),
                nr_requests: Some(1023),
                scheduler: Some("none".into()),
                write_cache: Some("write back".into()),
                rotational: Some(false),
                kind: Some("nvme".into()),
                below: Vec::new(),
                link: Some(PcieLink {
                    current_speed: "8.0 GT/s PCIe".into(),
                    max_speed: "16.0 GT/s PCIe".into(),
                    current_width: 4,
                    max_width: 4,
                }),
            }
        );
        assert_eq!(devices[0].kind.as_deref(), Some("device-mapper"));
        assert_eq!(devices[0].scheduler.as_deref(), Some("none"));
        assert_eq!(devices[0].below, ["nvme0n1p1", "nvme0n1p2"]);
        assert_eq!(devices[0].link, None);
        assert_eq!(devices[2].kind.as_deref(), Some("rbd"));
    }

    #[test]
    fn a_partition_leads_to_its_disk() {
        let sys = FakeSys::new("partition");
        sys.write("devices/vda/dev", "254:0\n");
        sys.write("devices/vda/vda1/dev", "254:1\n");
        sys.write("devices/vda/vda1/partition", "1\n");
        sys.link("dev/block/254:0", "../../devices/vda");
        sys.link("dev/block/254:1", "../../devices/vda/vda1");
        let dev_block = sys.0.join("dev/block");
        let read = whole_disk(&dev_block, "254:1", "stat(x): st_dev 254:1");
        assert_eq!(read.value, "254:0");
        assert_eq!(
            read.source,
            "stat(x): st_dev 254:1, a partition of vda (254:0)"
        );
        let read = whole_disk(&dev_block, "254:0", "stat(y): st_dev 254:0");
        assert_eq!(read.value, "254:0");
        assert_eq!(read.source, "stat(y): st_dev 254:0 (vda)");
        let read = whole_disk(&dev_block, "8:0", "stat(z): st_dev 8:0");
        assert_eq!(read.value, "8:0");
    }

    #[test]
    fn scheduler_and_kind_names() {
        assert_eq!(
            scheduler_in_use("none [mq-deadline] kyber bfq").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(scheduler_in_use("none").as_deref(), Some("none"));
        assert_eq!(scheduler_in_use(""), None);
        assert_eq!(
            kind_of("vda", Some("virtio_blk")).as_deref(),
            Some("virtio")
        );
        assert_eq!(kind_of("mmcblk0", None).as_deref(), Some("mmc"));
        assert_eq!(kind_of("md127", None).as_deref(), Some("md"));
        assert_eq!(kind_of("weird", None), None);
    }

    #[test]
    fn this_machines_root_and_proc() {
        // /proc is no block device anywhere; / is one unless the tests run in a container
        // (overlay), and then it must be a device of /sys/block.
        assert_eq!(device_of_path("/proc"), None);
        if let Some(root) = device_of_path("/") {
            println!("/: {} ({})", root.value, root.source);
            let devices = read_block_devices();
            assert!(
                devices.iter().any(|d| d.device == root.value),
                "{root:?} not in {devices:?}"
            );
        }
        // A file that does not exist is found by its directory.
        let gone = format!("/proc/peakbench-no-such-file-{}", std::process::id());
        assert_eq!(device_of_path(&gone), None);
        assert_eq!(device_of_path("/"), device_of_path("/no-such-file-at-all"));
    }
}
