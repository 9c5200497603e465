//! Shared by the fact targets: run one answer through every fact parser kwin has (one sample
//! of every fact kind the modules' tables list, `kwin_modules::fact_samples`).

#![allow(dead_code)]

use kwin_engine::fact::FactOutput;

/// Every fact parser, Linux, Windows and Kubernetes.
pub fn every_parser(out: &FactOutput) {
    for s in kwin_modules::fact_samples() {
        let _ = s.parse(out);
    }
}
