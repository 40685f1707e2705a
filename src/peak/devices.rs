//! The memory, NIC and disk peaks: channels × transfer rate, the link speed, and the device's
//! ratings, which only the user can give.

use serde::{Deserialize, Serialize};

use super::{Factor, PeakRef, flag_or_unknown, trim_float};
use crate::options::PeakOverrides;
use crate::sysinfo::SysInfo;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryPeak {
    pub channels: Factor,
    pub mts: Factor,
    pub bytes_per_transfer: Factor,
    /// GB/s (decimal), when every factor is known.
    pub value: Option<f64>,
    pub unit: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NicPeak {
    pub interface: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loopback: bool,
    pub gbps: Factor,
}

/// The device's ratings, which only the user can give. `mbps` and `iops` are the flags that rate
/// reads and writes alike (`--disk-mbps`, `--disk-iops`); the per-op fields are what read and
/// write cases use: the per-op flag, else the shared one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiskPeak {
    pub mbps: Factor,
    pub iops: Factor,
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub read_mbps: Factor,
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub write_mbps: Factor,
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub read_iops: Factor,
    #[serde(default, skip_serializing_if = "Factor::is_unrecorded")]
    pub write_iops: Factor,
}

impl DiskPeak {
    pub(super) fn from_flags(flags: &PeakOverrides) -> DiskPeak {
        let per_op = |own: Option<f64>, own_flag: &str, both: Option<f64>, both_flag: &str| match (
            own, both,
        ) {
            (Some(v), _) => Factor::known(v, "flag", own_flag),
            (None, Some(v)) => Factor::known(v, "flag", both_flag),
            (None, None) => Factor::unknown(format!(
                "not readable from the system: give the device's rating with {own_flag} \
                     or {both_flag}"
            )),
        };
        DiskPeak {
            mbps: flag_or_unknown(flags.disk_mbps, "--disk-mbps", "the device's rated MB/s"),
            iops: flag_or_unknown(flags.disk_iops, "--disk-iops", "the device's rated IOPS"),
            read_mbps: per_op(
                flags.disk_read_mbps,
                "--disk-read-mbps",
                flags.disk_mbps,
                "--disk-mbps",
            ),
            write_mbps: per_op(
                flags.disk_write_mbps,
                "--disk-write-mbps",
                flags.disk_mbps,
                "--disk-mbps",
            ),
            read_iops: per_op(
                flags.disk_read_iops,
                "--disk-read-iops",
                flags.disk_iops,
                "--disk-iops",
            ),
            write_iops: per_op(
                flags.disk_write_iops,
                "--disk-write-iops",
                flags.disk_iops,
                "--disk-iops",
            ),
        }
    }

    /// The (read, write) ratings in MB/s or IOPS; a document written before the per-op ratings
    /// existed falls back to the shared one.
    pub fn ratings(&self, iops: bool) -> (&Factor, &Factor) {
        let (shared, read, write) = if iops {
            (&self.iops, &self.read_iops, &self.write_iops)
        } else {
            (&self.mbps, &self.read_mbps, &self.write_mbps)
        };
        fn or_shared<'a>(f: &'a Factor, shared: &'a Factor) -> &'a Factor {
            if f.is_unrecorded() { shared } else { f }
        }
        (or_shared(read, shared), or_shared(write, shared))
    }

    /// The rated peak of a case whose bytes (or I/Os) are `read_fraction` reads (1 for a read
    /// case, 0 for a write case), in MB/s (`iops` false) or IOPS, with its source. A mix uses
    /// the time the device needs: a fraction f of reads at rating R and 1 − f of writes at W take
    /// f/R + (1 − f)/W per unit, so the peak is the weighted harmonic mean 1 / (f/R + (1 − f)/W)
    /// (reads and writes served one after another, not overlapped).
    pub fn for_mix(&self, read_fraction: f64, iops: bool) -> Option<(f64, String)> {
        let (read, write) = self.ratings(iops);
        let name = |f: &Factor| format!("{}: {}", f.source, f.detail);
        if read_fraction >= 1.0 {
            return read
                .value
                .map(|v| (v, format!("the device's read rating ({})", name(read))));
        }
        if read_fraction <= 0.0 {
            return write
                .value
                .map(|v| (v, format!("the device's write rating ({})", name(write))));
        }
        let (r, w) = (read.value?, write.value?);
        let f = read_fraction;
        let value = 1.0 / (f / r + (1.0 - f) / w);
        Some((
            value,
            format!(
                "the device's ratings weighted by the mix: {} % reads at {} ({}), {} % writes at \
                 {} ({}); peak = 1 / (f/R + (1 − f)/W), the harmonic mean by the time each \
                 part takes",
                trim_float(f * 100.0),
                trim_float(r),
                name(read),
                trim_float((1.0 - f) * 100.0),
                trim_float(w),
                name(write)
            ),
        ))
    }
}
/// A reason with the flag that fixes it, unless the reason already names one.
fn with_fix(reason: Option<&str>, fix: &str) -> String {
    match reason {
        Some(r) if r.contains("--") => r.to_string(),
        Some(r) => format!("{r}; {fix}"),
        None => format!("no DIMM inventory; {fix}"),
    }
}

pub(super) fn memory_peak(info: &SysInfo, flags: &PeakOverrides) -> MemoryPeak {
    let mem = &info.memory;
    let channels = match (flags.mem_channels, &mem.channels) {
        (Some(c), _) => Factor::known(c as f64, "flag", "--mem-channels"),
        (None, fact) => match (fact.value, &fact.source) {
            (Some(c), Some(src)) => Factor::known(c as f64, "dmi", src.clone()),
            _ => Factor::unknown(with_fix(fact.reason.as_deref(), "give --mem-channels")),
        },
    };
    let mts = match (flags.mem_mts, &mem.mts) {
        (Some(m), _) => Factor::known(m as f64, "flag", "--mem-mts"),
        (None, fact) => match (fact.value, &fact.source) {
            (Some(m), Some(src)) => Factor::known(m as f64, "dmi", src.clone()),
            _ => Factor::unknown(with_fix(
                fact.reason.as_deref(),
                "give --mem-mts (e.g. 3200 for DDR4-3200)",
            )),
        },
    };
    let bytes = Factor::known(8.0, "definition", "a DDR channel is 64 bits wide");
    let value = match (channels.value, mts.value) {
        (Some(c), Some(m)) => Some(c * m * 8.0 / 1000.0),
        _ => None,
    };
    MemoryPeak {
        channels,
        mts,
        bytes_per_transfer: bytes,
        value,
        unit: "GB/s".to_string(),
    }
}

impl MemoryPeak {
    pub fn as_ref(&self) -> Option<PeakRef> {
        Some(PeakRef {
            value: self.value?,
            unit: self.unit.clone(),
            source: format!(
                "{} channels × {} MT/s × 8 B = {} GB/s; {}; {}",
                trim_float(self.channels.value?),
                trim_float(self.mts.value?),
                trim_float(self.value?),
                self.channels.describe("channels"),
                self.mts.describe("MT/s")
            ),
            pair: None,
        })
    }
}

pub(super) fn nic_peaks(info: &SysInfo, flags: &PeakOverrides) -> Vec<NicPeak> {
    info.nics
        .iter()
        .map(|nic| {
            let fact = &nic.speed_mbps;
            let gbps = if let Some(g) = flags.nic_gbps {
                Factor::known(
                    g,
                    "flag",
                    if nic.loopback {
                        "--nic-gbps, the user's assumed peak (loopback has no link speed)"
                    } else {
                        "--nic-gbps"
                    },
                )
            } else if nic.loopback {
                Factor::unknown(
                    "loopback has no link speed; its bound is the memory copy bandwidth (or give \
                     --nic-gbps)",
                )
            } else if let (Some(mbps), Some(source)) = (fact.value, &fact.source) {
                Factor::known(mbps as f64 / 1000.0, "sysfs", source.clone())
            } else {
                Factor::unknown(format!(
                    "{}; give --nic-gbps",
                    fact.reason.as_deref().unwrap_or("no link speed")
                ))
            };
            NicPeak {
                interface: nic.name.clone(),
                loopback: nic.loopback,
                gbps,
            }
        })
        .collect()
}
