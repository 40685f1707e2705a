//! Devices: the block devices of /sys/block and the network interfaces of /sys/class/net.

use super::root::Root;
use super::{BlockDevice, Fact, NetInterface};

/// The active scheduler of a queue/scheduler file: the bracketed one, or the only one listed.
pub(super) fn parse_scheduler(text: &str) -> Option<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let active = words
        .iter()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
    match (active, words.as_slice()) {
        (Some(active), _) => Some(active.to_string()),
        (None, [only]) => Some((*only).to_string()),
        _ => None,
    }
}

pub(super) fn read_disks(root: Root) -> Vec<BlockDevice> {
    root.subdirs("/sys/block")
        .into_iter()
        .filter(|name| !["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)))
        .map(|name| read_disk(root, name))
        .collect()
}

fn read_disk(root: Root, name: String) -> BlockDevice {
    let file = |rel: &str| format!("/sys/block/{name}/{rel}");
    BlockDevice {
        model: root.read_trim(&file("device/model")),
        size_bytes: root
            .parse::<u64>(&file("size"))
            .and_then(|sectors| sectors.checked_mul(512)),
        rotational: match root.read_trim(&file("queue/rotational")).as_deref() {
            Some("1") => Some(true),
            Some("0") => Some(false),
            _ => None,
        },
        logical_sector_bytes: root.parse(&file("queue/logical_block_size")),
        physical_sector_bytes: root.parse(&file("queue/physical_block_size")),
        queue_depth: root.parse(&file("queue/nr_requests")),
        scheduler: root
            .read_trim(&file("queue/scheduler"))
            .and_then(|text| parse_scheduler(&text)),
        name,
    }
}

/// Link speed from the text of a /sys/class/net/*/speed file (or why it could not be read),
/// which `source` names.
pub(super) fn link_speed(read: Result<String, String>, loopback: bool, source: &str) -> Fact<u64> {
    if loopback {
        return Fact::unknown("loopback has no link speed");
    }
    let text = match read {
        Ok(text) => text,
        Err(error) => {
            return Fact::unknown(format!(
                "{error} (the link is down or the driver reports no speed)"
            ));
        }
    };
    let text = text.trim();
    match text.parse::<i64>() {
        Ok(mbps) if mbps > 0 && mbps != i64::from(u32::MAX) => {
            Fact::read(mbps.unsigned_abs(), source)
        }
        Ok(mbps) => Fact::unknown(format!("the driver reports no link speed ({mbps})")),
        Err(_) => Fact::unknown(format!("{source} holds '{text}', not a speed")),
    }
}

pub(super) fn read_nics(root: Root) -> Vec<NetInterface> {
    root.subdirs("/sys/class/net")
        .into_iter()
        .map(|name| read_nic(root, name))
        .collect()
}

fn read_nic(root: Root, name: String) -> NetInterface {
    let file = |rel: &str| format!("/sys/class/net/{name}/{rel}");
    let loopback = name == "lo" || root.parse::<u32>(&file("type")) == Some(772);
    let speed_file = file("speed");
    let driver = root.link_name(&file("device/driver"));
    let mut speed_mbps = link_speed(root.read(&speed_file), loopback, &speed_file);
    // A veth reports 10000 Mb/s, a tun 10: constants of their drivers, not a link, which
    // a software interface (no device under it) does not have.
    if let (None, false, Some(nominal)) = (&driver, loopback, speed_mbps.value) {
        speed_mbps = Fact::unknown(format!(
            "{name} is a software interface (a veth, bridge or tunnel: no device under it); \
             the {nominal} Mb/s it reports is nominal, not a link"
        ));
    }
    NetInterface {
        driver,
        mtu: root.parse(&file("mtu")),
        speed_mbps,
        state: root.read_trim(&file("operstate")),
        loopback,
        name,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::super::root::write_fixture as write;
    use super::*;

    #[test]
    fn schedulers() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber bfq\n").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(
            parse_scheduler("[none] mq-deadline").as_deref(),
            Some("none")
        );
        assert_eq!(parse_scheduler("none").as_deref(), Some("none"));
        assert_eq!(parse_scheduler("none kyber"), None);
    }

    #[test]
    fn link_speeds() {
        let src = "/sys/class/net/eth0/speed";
        assert_eq!(
            link_speed(Ok("25000\n".into()), false, src),
            Fact::read(25000, src)
        );
        assert_eq!(
            link_speed(Ok("-1\n".into()), false, src),
            Fact::unknown("the driver reports no link speed (-1)")
        );
        assert!(
            link_speed(Ok("4294967295".into()), false, src)
                .value
                .is_none()
        );
        assert_eq!(
            link_speed(Err("x".into()), true, src),
            Fact::unknown("loopback has no link speed")
        );
        let unreadable = link_speed(Err("cannot read it".into()), false, src);
        assert!(unreadable.reason.unwrap().starts_with("cannot read it"));
    }

    /// A sysfs-like tree of block devices (two disks, a loop and a zram device) and network
    /// interfaces (loopback, one with a driver and a speed, one without).
    fn sysfs_fixture(root: &Path) {
        write(root, "/sys/block/vda/size", "1048576\n");
        write(root, "/sys/block/vda/queue/rotational", "1\n");
        write(root, "/sys/block/vda/queue/logical_block_size", "512\n");
        write(root, "/sys/block/vda/queue/physical_block_size", "4096\n");
        write(root, "/sys/block/vda/queue/nr_requests", "256\n");
        write(
            root,
            "/sys/block/vda/queue/scheduler",
            "none [mq-deadline] kyber\n",
        );
        write(
            root,
            "/sys/block/nvme0n1/device/model",
            "Fast NVMe Disk          \n",
        );
        write(root, "/sys/block/nvme0n1/queue/rotational", "0\n");
        write(
            root,
            "/sys/block/nvme0n1/queue/scheduler",
            "[none] mq-deadline\n",
        );
        write(root, "/sys/block/loop0/size", "0\n");
        write(root, "/sys/block/zram0/size", "0\n");

        let net = "/sys/class/net";
        write(root, &format!("{net}/bonding_masters"), "\n");
        write(root, &format!("{net}/lo/mtu"), "65536\n");
        write(root, &format!("{net}/lo/type"), "772\n");
        write(root, &format!("{net}/lo/operstate"), "unknown\n");
        write(root, &format!("{net}/ens5/mtu"), "9001\n");
        write(root, &format!("{net}/ens5/speed"), "25000\n");
        write(root, &format!("{net}/ens5/type"), "1\n");
        write(root, &format!("{net}/ens5/operstate"), "up\n");
        write(root, "/sys/bus/pci/drivers/ena/.keep", "");
        fs::create_dir_all(root.join("sys/class/net/ens5/device")).unwrap();
        std::os::unix::fs::symlink(
            root.join("sys/bus/pci/drivers/ena"),
            root.join("sys/class/net/ens5/device/driver"),
        )
        .unwrap();
        write(root, &format!("{net}/eth1/speed"), "-1\n");
        write(root, &format!("{net}/eth1/type"), "1\n");
        write(root, &format!("{net}/veth0/speed"), "10000\n");
        write(root, &format!("{net}/veth0/type"), "1\n");
    }

    #[test]
    fn sysfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        sysfs_fixture(dir.path());
        let root = Root(dir.path());
        let disks = read_disks(root);
        let nics = read_nics(root);
        let names: Vec<_> = disks.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["nvme0n1", "vda"]);
        let nvme = &disks[0];
        assert_eq!(nvme.model.as_deref(), Some("Fast NVMe Disk"));
        assert_eq!(
            (nvme.rotational, nvme.scheduler.as_deref(), nvme.size_bytes),
            (Some(false), Some("none"), None)
        );
        let vda = &disks[1];
        assert_eq!(vda.size_bytes, Some(512 << 20));
        assert_eq!(
            (vda.logical_sector_bytes, vda.physical_sector_bytes),
            (Some(512), Some(4096))
        );
        assert_eq!(
            (vda.queue_depth, vda.scheduler.as_deref()),
            (Some(256), Some("mq-deadline"))
        );

        let names: Vec<_> = nics.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["ens5", "eth1", "lo", "veth0"]);
        let ens5 = &nics[0];
        assert_eq!(ens5.driver.as_deref(), Some("ena"));
        assert_eq!((ens5.mtu, ens5.state.as_deref()), (Some(9001), Some("up")));
        assert_eq!(
            ens5.speed_mbps,
            Fact::read(25000, "/sys/class/net/ens5/speed")
        );
        assert_eq!(
            nics[1].speed_mbps.reason.as_deref(),
            Some("the driver reports no link speed (-1)")
        );
        let lo = &nics[2];
        assert!(lo.loopback && lo.driver.is_none());
        assert_eq!(
            lo.speed_mbps.reason.as_deref(),
            Some("loopback has no link speed")
        );
        // A veth's 10000 Mb/s is its driver's constant, not a link.
        let veth = &nics[3];
        assert_eq!(veth.speed_mbps.value, None);
        assert!(
            veth.speed_mbps
                .reason
                .as_deref()
                .unwrap()
                .contains("nominal"),
            "{:?}",
            veth.speed_mbps
        );
    }
}
