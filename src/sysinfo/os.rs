//! The operating system: the host name and kernel release (procfs, else uname), the
//! distribution (os-release), and the hypervisor the machine runs under, if any.

use super::cpu::CpuinfoEntry;
use super::root::Root;
use super::{Fact, OsInfo};

/// PRETTY_NAME of an os-release file, unquoted.
pub(super) fn parse_os_release(text: &str) -> Option<String> {
    let value = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("PRETTY_NAME="))?
        .trim();
    let unquoted = ['"', '\'']
        .into_iter()
        .find_map(|q| value.strip_prefix(q)?.strip_suffix(q))
        .unwrap_or(value);
    (!unquoted.is_empty()).then(|| unquoted.to_string())
}

pub(super) fn read_os(root: Root) -> (String, OsInfo) {
    let uname = uname();
    let hostname = root
        .read_trim("/proc/sys/kernel/hostname")
        .or_else(|| uname.as_ref().map(|u| u.0.clone()))
        .unwrap_or_default();
    let kernel = root
        .read_trim("/proc/sys/kernel/osrelease")
        .or_else(|| uname.map(|u| u.1))
        .unwrap_or_default();
    let os = OsInfo {
        kernel,
        distribution: distribution(root),
        arch: std::env::consts::ARCH.to_string(),
    };
    (hostname, os)
}

fn distribution(root: Root) -> Fact<String> {
    let mut problems = Vec::new();
    for path in ["/etc/os-release", "/usr/lib/os-release"] {
        match root.read(path) {
            Ok(text) => match parse_os_release(&text) {
                Some(name) => return Fact::read(name, format!("{path}: PRETTY_NAME")),
                None => problems.push(format!("no PRETTY_NAME in {path}")),
            },
            Err(error) => problems.push(error),
        }
    }
    Fact::unknown(problems.join("; "))
}

/// Node name and release from uname(2).
fn uname() -> Option<(String, String)> {
    // SAFETY: utsname is plain arrays of c_char, for which all zero bytes are a valid value.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid, writable utsname.
    if unsafe { libc::uname(&mut name) } != 0 {
        return None;
    }
    Some((c_chars(&name.nodename), c_chars(&name.release)))
}

fn c_chars(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The usual name of a hypervisor from its CPUID signature or /sys/hypervisor/type; other
/// signatures are returned as they are.
pub(super) fn hypervisor_name(signature: &str) -> String {
    let name = match signature.trim_matches('\0').trim() {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" | "xen" => "Xen",
        "TCGTCGTCGTCG" => "QEMU TCG",
        other => other,
    };
    name.to_string()
}

pub(super) fn hypervisor(
    root: Root,
    cpu0: Option<&CpuinfoEntry>,
    cpuid: Option<&str>,
) -> Fact<String> {
    let sysfs = root
        .read_trim("/sys/hypervisor/type")
        .map(|t| Fact::read(hypervisor_name(&t), "/sys/hypervisor/type"));
    let Some(cpu0) = cpu0.filter(|c| c.x86_flags) else {
        return sysfs.unwrap_or_else(|| {
            Fact::unknown("no x86 flags in /proc/cpuinfo and no /sys/hypervisor/type")
        });
    };
    if !cpu0.flags.iter().any(|f| f == "hypervisor") {
        // A Xen dom0 can lack the flag while /sys/hypervisor/type still names Xen.
        return sysfs.unwrap_or_else(|| {
            Fact::read(
                "none".to_string(),
                "/proc/cpuinfo flags (no hypervisor flag)",
            )
        });
    }
    sysfs
        .or_else(|| cpuid.map(|name| Fact::read(name.to_string(), "CPUID leaf 0x40000000")))
        .unwrap_or_else(|| {
            Fact::unknown(
                "hypervisor flag in /proc/cpuinfo, but neither /sys/hypervisor/type nor CPUID \
                 leaf 0x40000000 names the vendor",
            )
        })
}

/// The hypervisor's name from CPUID leaf 0x40000000, when CPUID says one is present.
#[cfg(target_arch = "x86_64")]
pub(super) fn cpuid_hypervisor_vendor() -> Option<String> {
    use core::arch::x86_64::__cpuid;
    // Leaf 1, ECX bit 31: a hypervisor is present; only then does leaf 0x40000000 mean anything.
    if __cpuid(1).ecx & (1 << 31) == 0 {
        return None;
    }
    let leaf = __cpuid(0x4000_0000);
    let bytes: Vec<u8> = [leaf.ebx, leaf.ecx, leaf.edx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    let signature = String::from_utf8_lossy(&bytes);
    let name = hypervisor_name(&signature);
    (!name.is_empty()).then_some(name)
}

/// CPUID exists only on x86.
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn cpuid_hypervisor_vendor() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::super::cpu::parse_cpuinfo;
    use super::super::root::write_fixture as write;
    use super::*;

    /// An x86 processor without the hypervisor flag, as on bare metal.
    const BARE_METAL: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse sse2\n";

    /// An x86 processor with the hypervisor flag, as in a guest.
    const GUEST: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu hypervisor\n";

    /// The hypervisor told from a cpuinfo, an optional /sys/hypervisor/type and what CPUID says.
    fn hypervisor_of(cpuinfo: &str, sysfs_type: Option<&str>, cpuid: Option<&str>) -> Fact<String> {
        let dir = tempfile::tempdir().unwrap();
        if let Some(kind) = sysfs_type {
            write(dir.path(), "/sys/hypervisor/type", kind);
        }
        hypervisor(Root(dir.path()), parse_cpuinfo(cpuinfo).first(), cpuid)
    }

    #[test]
    fn hypervisor_vendor_sources() {
        assert_eq!(
            hypervisor_of(BARE_METAL, None, None),
            Fact::read(
                "none".to_string(),
                "/proc/cpuinfo flags (no hypervisor flag)"
            )
        );
        assert_eq!(
            hypervisor_of(GUEST, None, Some("KVM")),
            Fact::read("KVM".to_string(), "CPUID leaf 0x40000000")
        );
        let unnamed = hypervisor_of(GUEST, None, None);
        assert!(unnamed.value.is_none());
        assert!(unnamed.reason.unwrap().contains("hypervisor flag"));
        assert_eq!(
            hypervisor_of(GUEST, Some("xen\n"), Some("KVM")),
            Fact::read("Xen".to_string(), "/sys/hypervisor/type")
        );

        assert_eq!(hypervisor_name("KVMKVMKVM\0\0\0"), "KVM");
        assert_eq!(hypervisor_name("Microsoft Hv"), "Hyper-V");
        assert_eq!(hypervisor_name("VMwareVMware"), "VMware");
        assert_eq!(hypervisor_name("XenVMMXenVMM"), "Xen");
        assert_eq!(hypervisor_name("TCGTCGTCGTCG"), "QEMU TCG");
        assert_eq!(hypervisor_name("bhyve bhyve "), "bhyve bhyve");
    }

    #[test]
    fn os_release_pretty_names() {
        let os = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(
            parse_os_release(os).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            parse_os_release("PRETTY_NAME=Alpine\n").as_deref(),
            Some("Alpine")
        );
        assert_eq!(parse_os_release("NAME=x\n"), None);
    }

    #[test]
    fn host_kernel_and_distribution_from_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "/proc/sys/kernel/hostname", "fixture\n");
        write(root, "/proc/sys/kernel/osrelease", "6.1.0-test\n");
        write(root, "/usr/lib/os-release", "PRETTY_NAME=\"Test Linux\"\n");
        let (hostname, os) = read_os(Root(root));
        assert_eq!(hostname, "fixture");
        assert_eq!(os.kernel, "6.1.0-test");
        assert_eq!(
            os.distribution,
            Fact::read("Test Linux".to_string(), "/usr/lib/os-release: PRETTY_NAME")
        );
    }
}
