//! The option groups every benchmark command shares, and the one set of value parsers behind
//! every flag.
//!
//! A leaf: it knows clap and the units, nothing of the subsystems. Lists are comma-separated
//! (`value_delimiter = ','` on the field) and each element goes through one of the parsers
//! here, so `--threads 1,,2` is refused with the flag's name like any other bad value;
//! [`unique`] then drops repeated elements, keeping the first.

use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::names::Named;
use crate::units::{parse_count, parse_duration, parse_size};

/// How each case is repeated.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Repetitions")]
pub struct RunnerArgs {
    /// Measured repetitions per case (the value is their median)
    #[arg(long, short = 'r', default_value = "3", value_name = "N", value_parser = positive_u32)]
    pub repetitions: u32,
    /// Unmeasured warm-up before the repetitions (0 to skip)
    #[arg(long, default_value = "200ms", value_name = "DURATION", value_parser = duration)]
    pub warmup: Duration,
    /// Pin thread i to the i-th CPU
    #[arg(long)]
    pub pin: bool,
    /// Also run the standard tool of the field on each case (when installed) and record its value and the ratio
    #[arg(long)]
    pub reference: bool,
}

/// How every case of a run is repeated, as the runner and the cases see it: built once from
/// [`RunnerArgs`], or from a command's own flags (`check --repetitions`) over the defaults.
/// A results document carries it as the `runner` of its configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunnerOptions {
    /// Measured repetitions per case.
    pub repetitions: u32,
    /// Unmeasured warm-up before the repetitions; zero skips it.
    pub warmup: Duration,
    /// Pin thread i to the i-th CPU.
    pub pin: bool,
    /// Also run the standard tool of the field on each case.
    pub reference: bool,
    /// Read where the first two CPUs of each case that uses two or more sit, by a cache line's
    /// round trip between them just before and just after it (`peakbench check`, and every run
    /// inside a guest).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub placement: bool,
}

impl Default for RunnerOptions {
    /// What [`RunnerArgs`] holds when no flag of it is given.
    fn default() -> Self {
        RunnerOptions {
            repetitions: 3,
            warmup: Duration::from_millis(200),
            pin: false,
            reference: false,
            placement: false,
        }
    }
}

impl From<&RunnerArgs> for RunnerOptions {
    fn from(args: &RunnerArgs) -> Self {
        let RunnerArgs {
            repetitions,
            warmup,
            pin,
            reference,
        } = *args;
        RunnerOptions {
            repetitions,
            warmup,
            pin,
            reference,
            placement: false,
        }
    }
}

/// `--json`: one JSON document on stdout instead of the text, for every command that prints one.
#[derive(Args, Debug, Clone, Copy, Default)]
pub(crate) struct Json {
    /// Print one JSON document on stdout instead of the text (and nothing else there)
    #[arg(long = "json", id = "json")]
    pub on: bool,
}

/// How results are shown and kept.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Output")]
pub(crate) struct OutputArgs {
    #[command(flatten)]
    pub json: Json,
    /// Print CSV on stdout, one row per result
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Also write the results to FILE (.json, .csv, .md or .txt), rewritten after every case
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the plan and its estimated duration, run nothing
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub history: StoreArgs,
}

/// Where the history is, for every command that reads or writes it.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct DbArgs {
    /// History database (default: $PEAKBENCH_DB, else $XDG_DATA_HOME/peakbench/history.db, else ~/.local/share/peakbench/history.db)
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

/// History options of a measuring command.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "History")]
pub(crate) struct StoreArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Do not store this run in the history
    #[arg(long, conflicts_with = "db")]
    pub no_history: bool,
}

/// Factors of the theoretical peaks that the machine does not tell (or tells wrongly).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Peak factors")]
pub struct PeakArgs {
    /// Nominal (base) CPU clock in GHz for the peak (e.g. 2.5)
    #[arg(long, allow_negative_numbers = true, value_name = "GHZ", value_parser = peak_factor)]
    pub cpu_ghz: Option<f64>,
    /// Turbo CPU clock in GHz (the max turbo of the spec sheet, or the all-core turbo if you
    /// know it), for the peak at turbo beside the one at the base clock (e.g. 3.1)
    #[arg(long, allow_negative_numbers = true, value_name = "GHZ", value_parser = peak_factor)]
    pub cpu_turbo_ghz: Option<f64>,
    /// Physical cores for the peak
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = positive_u32)]
    pub cores: Option<u32>,
    /// FMA units per core at the widest vector ISA (e.g. 2 on a Xeon Platinum)
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = peak_factor)]
    pub fma_units: Option<f64>,
    /// Vector integer add units per core at the widest vector ISA (scalar ALUs on a CPU
    /// without vectors), e.g. 2 on Sandy Bridge at 128 bit
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = peak_factor)]
    pub int_units: Option<f64>,
    /// Populated memory channels
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = positive_u32)]
    pub mem_channels: Option<u32>,
    /// Memory transfer rate in MT/s (e.g. 3200 for DDR4-3200)
    #[arg(long, allow_negative_numbers = true, value_name = "MTS", value_parser = positive_u32)]
    pub mem_mts: Option<u32>,
    /// NIC link speed in Gb/s
    #[arg(long, allow_negative_numbers = true, value_name = "GBPS", value_parser = peak_factor)]
    pub nic_gbps: Option<f64>,
    /// Rated disk throughput in MB/s
    #[arg(long, allow_negative_numbers = true, value_name = "MBPS", value_parser = peak_factor)]
    pub disk_mbps: Option<f64>,
    /// Rated disk IOPS
    #[arg(long, allow_negative_numbers = true, value_name = "IOPS", value_parser = peak_factor)]
    pub disk_iops: Option<f64>,
    /// Rated disk read throughput in MB/s (for read cases; else --disk-mbps)
    #[arg(long, allow_negative_numbers = true, value_name = "MBPS", value_parser = peak_factor)]
    pub disk_read_mbps: Option<f64>,
    /// Rated disk write throughput in MB/s (for write cases; else --disk-mbps)
    #[arg(long, allow_negative_numbers = true, value_name = "MBPS", value_parser = peak_factor)]
    pub disk_write_mbps: Option<f64>,
    /// Rated disk read IOPS (for read cases; else --disk-iops)
    #[arg(long, allow_negative_numbers = true, value_name = "IOPS", value_parser = peak_factor)]
    pub disk_read_iops: Option<f64>,
    /// Rated disk write IOPS (for write cases; else --disk-iops)
    #[arg(long, allow_negative_numbers = true, value_name = "IOPS", value_parser = peak_factor)]
    pub disk_write_iops: Option<f64>,
}

/// The factors of the theoretical peaks the user gave, as the peaks see them: built once from
/// [`PeakArgs`], which refuses what the flags say together that each alone cannot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeakOverrides {
    /// Nominal (base) CPU clock in GHz.
    pub cpu_ghz: Option<f64>,
    /// Turbo CPU clock in GHz, not below the base one.
    pub cpu_turbo_ghz: Option<f64>,
    /// Physical cores.
    pub cores: Option<u32>,
    /// FMA units per core at the widest vector ISA.
    pub fma_units: Option<f64>,
    /// Vector integer add units per core at the widest vector ISA.
    pub int_units: Option<f64>,
    /// Populated memory channels.
    pub mem_channels: Option<u32>,
    /// Memory transfer rate in MT/s.
    pub mem_mts: Option<u32>,
    /// NIC link speed in Gb/s.
    pub nic_gbps: Option<f64>,
    /// Rated disk throughput in MB/s.
    pub disk_mbps: Option<f64>,
    /// Rated disk IOPS.
    pub disk_iops: Option<f64>,
    /// Rated disk read throughput in MB/s.
    pub disk_read_mbps: Option<f64>,
    /// Rated disk write throughput in MB/s.
    pub disk_write_mbps: Option<f64>,
    /// Rated disk read IOPS.
    pub disk_read_iops: Option<f64>,
    /// Rated disk write IOPS.
    pub disk_write_iops: Option<f64>,
}

impl TryFrom<&PeakArgs> for PeakOverrides {
    type Error = crate::error::UsageError;

    /// The flags as given, unless the turbo clock is below the base one.
    fn try_from(args: &PeakArgs) -> Result<Self, Self::Error> {
        let PeakArgs {
            cpu_ghz,
            cpu_turbo_ghz,
            cores,
            fma_units,
            int_units,
            mem_channels,
            mem_mts,
            nic_gbps,
            disk_mbps,
            disk_iops,
            disk_read_mbps,
            disk_write_mbps,
            disk_read_iops,
            disk_write_iops,
        } = *args;
        if let (Some(base), Some(turbo)) = (cpu_ghz, cpu_turbo_ghz)
            && turbo < base
        {
            return Err(crate::error::UsageError(format!(
                "--cpu-turbo-ghz {turbo} is below --cpu-ghz {base}: the turbo clock is the \
                 higher one; give the two the other way round"
            )));
        }
        Ok(PeakOverrides {
            cpu_ghz,
            cpu_turbo_ghz,
            cores,
            fma_units,
            int_units,
            mem_channels,
            mem_mts,
            nic_gbps,
            disk_mbps,
            disk_iops,
            disk_read_mbps,
            disk_write_mbps,
            disk_read_iops,
            disk_write_iops,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The flags benchmarks share. Each is declared once here and flattened into every command that
// has it; a command states only its defaults, through [`Defaults`], because the work differs (a
// CPU kernel sizes its work to a second, a disk needs seconds to leave its caches).

/// What one benchmark command says of the shared flags it has: their defaults, in words for the
/// help where they depend on the machine.
pub trait Defaults: 'static {
    /// The thread counts when `--threads` is not given, in words ("1 and every CPU").
    const THREADS: &'static str = "1 and every CPU";
    /// `--duration` when it is not given.
    const DURATION: &'static str = "1s";
    /// How the command uses one `--duration`, when it is more than the length of a repetition.
    const DURATION_NOTE: &'static str = "";
}

/// `--threads`: the thread counts to sweep, a list.
#[derive(Args, Debug, Clone)]
pub struct Threads<D: Defaults> {
    #[arg(
        long = "threads",
        short = 't',
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = thread_count,
        help = format!("Thread counts (list; default: {})", D::THREADS)
    )]
    threads: Option<Vec<usize>>,
    #[arg(skip)]
    defaults: PhantomData<fn() -> D>,
}

impl<D: Defaults> Threads<D> {
    /// The counts given, without repeats, or `default` (what [`Defaults::THREADS`] says).
    pub fn or(&self, default: &[usize]) -> Vec<usize> {
        unique(self.threads.as_deref().unwrap_or(default))
    }

    /// The counts given, if any.
    pub fn given(&self) -> Option<&[usize]> {
        self.threads.as_deref()
    }
}

/// `--duration`: the length of one measured repetition.
#[derive(Args, Debug, Clone)]
pub(crate) struct Timing<D: Defaults> {
    #[arg(
        long = "duration",
        short = 'd',
        value_name = "DURATION",
        default_value = D::DURATION,
        value_parser = positive_duration,
        help = format!("Length of one measured repetition{}", D::DURATION_NOTE)
    )]
    pub duration: Duration,
    #[arg(skip)]
    defaults: PhantomData<fn() -> D>,
}

/// The list without repeated elements, in the order first given (`--proto tcp,tcp` is tcp).
pub(crate) fn unique<T: PartialEq + Clone>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

/// One value of a list, or `all` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OrAll<T> {
    One(T),
    All,
}

impl<T: Named> OrAll<T> {
    /// The values a list of choices stands for, without repeats, in order.
    pub(crate) fn expand(list: &[OrAll<T>]) -> Vec<T>
    where
        T: PartialEq,
    {
        let values: Vec<T> = list
            .iter()
            .flat_map(|item| match item {
                OrAll::One(v) => vec![*v],
                OrAll::All => T::ALL.to_vec(),
            })
            .collect();
        unique(&values)
    }
}

/// The parser of a list element that is one of `T`'s values (or an alias) or `all`; the help
/// lists them all.
pub(crate) fn or_all<T>() -> impl TypedValueParser<Value = OrAll<T>>
where
    T: Named + ValueEnum + Send + Sync + 'static,
{
    let mut values: Vec<PossibleValue> = T::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .collect();
    values.push(PossibleValue::new("all").help("every one of them"));
    PossibleValuesParser::new(values).map(|text: String| {
        if text.eq_ignore_ascii_case("all") {
            OrAll::All
        } else {
            OrAll::One(T::from_name(&text).expect("clap accepted one of the possible values"))
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Value parsers. clap prefixes each message with the flag ("invalid value '0' for '--threads'").

/// A duration of zero or more: `10s`, `500ms`, `2m`, `1.5s` or a number of seconds.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.0)
}

/// A duration above zero.
pub(crate) fn positive_duration(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        d if d.is_zero() => Err("a zero duration measures nothing: give e.g. 1s or 500ms".into()),
        d => Ok(d),
    }
}

/// A size of one byte or more, e.g. `8KB`, `4KiB`, `1GiB`.
pub(crate) fn positive_size(text: &str) -> Result<u64, String> {
    match parse_size(text).map_err(|e| e.0)? {
        0 => Err("0 bytes is nothing to measure: give a positive size, e.g. 8KB or 1GiB".into()),
        n => Ok(n),
    }
}

/// A count of one or more, e.g. `1000`, `10k`, `1M`.
pub(crate) fn positive_count(text: &str) -> Result<u64, String> {
    match parse_count(text).map_err(|e| e.0)? {
        0 => Err("0 is nothing: give a positive count, e.g. 1000 or 10M".into()),
        n => Ok(n),
    }
}

/// A whole number of one or more that fits 32 bits.
pub(crate) fn positive_u32(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) | Err(_) => Err(format!(
            "'{text}' is not a positive whole number: give e.g. 3"
        )),
        Ok(n) => Ok(n),
    }
}

/// A finite number above zero.
pub(crate) fn positive_f64(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("'{text}' is not a positive number: give e.g. 2.5")),
    }
}

/// The largest peak factor a flag takes: with it, every product of factors (clock × cores ×
/// lanes × FMA units …) stays finite, so a peak is never infinite (and stored as null).
pub(crate) const PEAK_FACTOR_MAX: f64 = 1e9;

/// A peak factor flag: a positive number up to [`PEAK_FACTOR_MAX`].
pub(crate) fn peak_factor(text: &str) -> Result<f64, String> {
    match positive_f64(text)? {
        v if v <= PEAK_FACTOR_MAX => Ok(v),
        _ => Err(format!(
            "'{text}' is beyond any machine (at most {PEAK_FACTOR_MAX:.0}): give the real figure, e.g. 2.5"
        )),
    }
}

/// A percentage, 0 to 100.
pub(crate) fn percent(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if n <= 100 => Ok(n),
        _ => Err(format!(
            "'{text}' is not a percentage: give 0 to 100, e.g. 70"
        )),
    }
}

/// A rate in bits per second as iperf3's `-b` takes it, and as its users write it: a whole or
/// decimal number, an optional decimal prefix (k, M, G, T, either case) and an optional unit
/// of bits (`bit`, `bits`, `b`, each optionally `/s`, or `bps`): `100K`, `500M`, `1G`,
/// `2.5G`, `1Gbit`, `500Mbit/s`, `1Gbps`. A capital `B` is bytes, and refused.
pub(crate) fn bit_rate(text: &str) -> Result<u64, String> {
    let usage = || {
        format!(
            "'{text}' is not a rate: give bits per second, e.g. 100K, 500M, 1G, 1Gbit or \
             500Mbit/s (decimal prefixes)"
        )
    };
    let trimmed = text.trim();
    let number_end = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, rest) = trimmed.split_at(number_end);
    let (scale, unit) = match rest.chars().next() {
        Some('k' | 'K') => (3, &rest[1..]),
        Some('m' | 'M') => (6, &rest[1..]),
        Some('g' | 'G') => (9, &rest[1..]),
        Some('t' | 'T') => (12, &rest[1..]),
        _ => (0, rest),
    };
    if unit.starts_with('B') {
        return Err(format!(
            "'{text}' is in bytes: a rate is in bits per second, e.g. 8G for 1 GB/s"
        ));
    }
    if !matches!(
        unit.to_ascii_lowercase().as_str(),
        "" | "bit" | "bits" | "b" | "bit/s" | "bits/s" | "b/s" | "bps"
    ) {
        return Err(usage());
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(usage());
    }
    if fraction.len() > scale {
        return Err(format!(
            "'{text}' is not a whole number of bits per second: give fewer decimals"
        ));
    }
    // whole × 10^scale + fraction × 10^(scale − its digits), in integers.
    let digits = format!("{whole}{fraction:0<scale$}");
    let bits = digits.parse::<u64>().map_err(|_| {
        format!("'{text}' is beyond any link: give at most 18 digits of bits per second")
    })?;
    if bits == 0 {
        return Err("0 bit/s sends nothing: give a positive rate, e.g. 100M".into());
    }
    Ok(bits)
}

/// The most threads (or streams) a case may ask for.
pub(crate) const MAX_THREADS: u64 = 4096;

/// A thread count, 1 to [`MAX_THREADS`].
pub(crate) fn thread_count(text: &str) -> Result<usize, String> {
    match parse_count(text).map_err(|e| e.0)? {
        0 => Err("0 threads run nothing: give 1 or more, e.g. 1,2,4,8".into()),
        n if n > MAX_THREADS => Err(format!(
            "{n} threads is more than peakbench runs ({MAX_THREADS}): give fewer"
        )),
        n => Ok(n as usize),
    }
}

/// Refuses an `--svg` path whose directory does not exist, or that is a directory, before
/// anything runs; `example` is a file name to suggest.
pub(crate) fn check_svg_path(path: &std::path::Path, example: &str) -> anyhow::Result<()> {
    if path.is_dir() {
        return Err(crate::error::usage(format!(
            "--svg: {} is a directory: give a file name, e.g. {example}",
            path.display()
        )));
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent
        && !parent.is_dir()
    {
        return Err(crate::error::usage(format!(
            "--svg: the directory {} does not exist: create it or give another path",
            parent.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_refuse_zero_and_nonsense() {
        assert_eq!(thread_count("8"), Ok(8));
        assert!(thread_count("0").unwrap_err().contains("0 threads"));
        assert!(thread_count("5000").unwrap_err().contains("4096"));
        assert!(thread_count("").is_err());
        assert!(positive_duration("0").is_err());
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        assert!(positive_size("0").is_err());
        assert_eq!(positive_size("8KB"), Ok(8000));
        assert!(positive_count("0").is_err());
        assert!(positive_f64("inf").is_err());
        assert!(positive_f64("-1").is_err());
        assert_eq!(percent("100"), Ok(100));
        assert!(percent("101").is_err());
    }

    /// With no flag of the group, the runner's options are their defaults.
    #[test]
    fn no_runner_flag_gives_the_default_options() {
        let cmd = RunnerArgs::augment_args(clap::Command::new("t"));
        let matches = cmd.try_get_matches_from(["t"]).unwrap();
        let args = <RunnerArgs as clap::FromArgMatches>::from_arg_matches(&matches).unwrap();
        assert_eq!(RunnerOptions::from(&args), RunnerOptions::default());
    }

    #[test]
    fn a_turbo_below_the_base_is_refused_naming_both_flags() {
        let flags = PeakArgs {
            cpu_ghz: Some(3.0),
            cpu_turbo_ghz: Some(2.0),
            ..PeakArgs::default()
        };
        let e = PeakOverrides::try_from(&flags).unwrap_err().0;
        assert!(
            e.contains("--cpu-turbo-ghz") && e.contains("--cpu-ghz"),
            "{e}"
        );
        let fine = PeakArgs {
            cpu_ghz: Some(2.0),
            cpu_turbo_ghz: Some(2.0),
            ..PeakArgs::default()
        };
        let given = PeakOverrides::try_from(&fine).unwrap();
        assert_eq!((given.cpu_ghz, given.cpu_turbo_ghz), (Some(2.0), Some(2.0)));
    }

    #[test]
    fn unique_keeps_the_first_of_each() {
        assert_eq!(unique(&[1, 2, 1, 4, 2]), vec![1, 2, 4]);
    }

    /// A rate parses as iperf3's users type it: in bits per second, with decimal prefixes.
    #[test]
    fn rates_take_what_iperf3_users_type() {
        for (text, bits) in [
            ("1G", 1_000_000_000),
            ("1Gbit", 1_000_000_000),
            ("1gbit", 1_000_000_000),
            ("1Gbps", 1_000_000_000),
            ("1Gb", 1_000_000_000),
            ("500M", 500_000_000),
            ("500m", 500_000_000),
            ("500Mbit/s", 500_000_000),
            ("500Mbits/s", 500_000_000),
            ("100K", 100_000),
            ("100k", 100_000),
            ("100Kbit", 100_000),
            ("2.5G", 2_500_000_000),
            ("1.5K", 1500),
            (".5M", 500_000),
            ("8000", 8000),
            ("8000bit/s", 8000),
            ("10T", 10_000_000_000_000),
            (" 1G ", 1_000_000_000),
        ] {
            assert_eq!(bit_rate(text), Ok(bits), "{text}");
        }
    }

    #[test]
    fn rates_in_bytes_fractions_of_a_bit_and_nothing_are_refused() {
        for text in ["1GB", "1GB/s", "100MBps", "1B"] {
            let error = bit_rate(text).unwrap_err();
            assert!(error.contains("bytes"), "{text}: {error}");
        }
        for text in ["", "G", "abc", "1X", "1Gbyte", "1.2.3M", "1Mbit/h", "-1M"] {
            assert!(bit_rate(text).is_err(), "{text}");
        }
        assert!(bit_rate("1.0001K").unwrap_err().contains("whole number"));
        assert!(bit_rate("0").unwrap_err().contains("nothing"));
        assert!(bit_rate("0.0M").unwrap_err().contains("nothing"));
        assert!(bit_rate("99999999999T").unwrap_err().contains("beyond"));
    }
}
