//! Reports of kevo runs, read from the store: the self-contained HTML run
//! report (`kevo report`), the results table across runs (`kevo table`)
//! and trajectory export for training (`kevo export --trajectories`).
//! Rendering is pure (data in, text out), so the same pages serve the
//! offline report and the live dashboard.

mod attempts;
mod data;
mod embed;
mod headline;
mod html;
pub mod kernelbench;
pub mod metal_sci;
pub mod results;
mod roofline;
pub mod run_view;
pub mod serve;
mod svg;
pub mod table;
mod tools;
pub mod trajectories;

pub use data::{Point, RunData};
pub use headline::Headline;
pub use html::{RenderOptions, render_report, render_report_with};
pub use run_view::{RunView, RunViewError};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] kevo_store::StoreError),
    #[error("cannot serve on {addr}: {cause}")]
    Bind {
        addr: std::net::SocketAddr,
        cause: std::io::Error,
    },
}
