//! The flags of `peakbench cpu gemm` and `peakbench cpu linpack`, declared once: both take
//! `--n`, `--threads`, `--precision` and `--blas`. Each command states only its defaults and the
//! words of its help, through [`DenseDefaults`].

use clap::Args;
use clap::ValueEnum as _;

use super::engine::blas::{BlasFlag, BlasFlagParser};
use crate::names::Named as _;
use crate::options::{Defaults, Threads, positive_count};
use crate::peak::Precision;

/// What one dense command says of the flags it shares with the other: `--n`'s default, and the
/// help of `--n`, `--precision` and `--blas` (`--threads`' default is [`Defaults::THREADS`]).
pub trait DenseDefaults: Defaults {
    /// `--n` when it is not given.
    const N: &'static str;
    /// The help of `--n`.
    const N_HELP: &'static str;
    /// The help of `--precision`.
    const PRECISION_HELP: &'static str;
    /// The help of `--blas`.
    const BLAS_HELP: &'static str;
}

/// The flags of `cpu gemm` (D = [`super::gemm::Gemm`]) or `cpu linpack`
/// (D = [`super::linpack::Linpack`]).
#[derive(Args, Debug)]
pub struct DenseArgs<D: DenseDefaults> {
    #[arg(
        long,
        short = 'n',
        value_name = "LIST",
        value_delimiter = ',',
        default_value = D::N,
        value_parser = positive_count,
        help = D::N_HELP
    )]
    pub n: Vec<u64>,
    #[command(flatten)]
    pub threads: Threads<D>,
    #[arg(
        long,
        short = 'p',
        value_name = "LIST",
        value_delimiter = ',',
        ignore_case = true,
        default_value = "f64",
        value_parser = dense_precision(),
        help = D::PRECISION_HELP
    )]
    pub precision: Vec<Precision>,
    #[arg(
        long,
        value_name = "BLAS",
        default_value = "auto",
        value_parser = BlasFlagParser,
        help = D::BLAS_HELP
    )]
    pub blas: BlasFlag,
}

/// The parser of `--precision`: f64 or f32, by [`Precision`]'s names.
fn dense_precision() -> impl clap::builder::TypedValueParser<Value = Precision> {
    use clap::builder::TypedValueParser as _;
    let values = [Precision::F64, Precision::F32]
        .map(|p| p.to_possible_value().expect("every precision has a name"));
    clap::builder::PossibleValuesParser::new(values)
        .map(|text| Precision::from_name(&text).expect("clap accepted f64 or f32"))
}
