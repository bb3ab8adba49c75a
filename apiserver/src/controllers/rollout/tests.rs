//! The rollout library against sdk-go's own table (`rollout_test.go`, ported case by case, in
//! `sdk_*`), the worked example of ocm-wave2.md §1.4, the `maxFailures` deviation and errors
//! (`scenarios`), and properties over random placements (`props`); this file holds the helpers
//! they share.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1alpha1::{
    MandatoryDecisionGroup, ROLLOUT_ALL, ROLLOUT_PROGRESSIVE, ROLLOUT_PROGRESSIVE_PER_GROUP,
    RolloutConfig, RolloutProgressive, RolloutProgressivePerGroup, RolloutStrategy,
};
use ocm_proto::api::meta::IntOrString;

use super::Status::{Failed, Progressing, Skip, Succeeded, TimeOut, ToApply};
use super::*;

mod props;
mod scenarios;
mod sdk_all_per_group;
mod sdk_progressive;

/// sdk-go's `fakeTime`, 2022-01-01T00:00:00Z: every case runs at it.
const EPOCH: i64 = 1_640_995_200;

/// `offset` seconds from the test's `now`.
fn at(offset: i64) -> Timestamp {
    Timestamp::from_second(EPOCH + offset).expect("in range")
}

fn now() -> Timestamp {
    at(0)
}

/// Groups from `(name, index, clusters)`.
fn groups(spec: &[(&str, i32, &[&str])]) -> Groups {
    Groups::new(spec.iter().map(|(name, index, clusters)| {
        (GroupKey::new(*name, *index), clusters.iter().map(|c| c.to_string()).collect::<Vec<_>>())
    }))
}

/// sdk-go's three-group placement: `group1` (0) c1–c3, (1) c4–c6, (2) c7–c9.
fn three_groups() -> Groups {
    groups(&[
        ("group1", 0, &["cluster1", "cluster2", "cluster3"]),
        ("", 1, &["cluster4", "cluster5", "cluster6"]),
        ("", 2, &["cluster7", "cluster8", "cluster9"]),
    ])
}

/// sdk-go's two-group placement: `group1` (0) c1–c3, (1) c4–c6.
fn two_groups() -> Groups {
    groups(&[
        ("group1", 0, &["cluster1", "cluster2", "cluster3"]),
        ("", 1, &["cluster4", "cluster5", "cluster6"]),
    ])
}

/// A status as sdk-go's dummy status function reports it: changed `since` seconds from now.
fn has(cluster: &str, group: (&str, i32), status: Status, since: Option<i64>) -> ClusterStatus {
    ClusterStatus::new(cluster, GroupKey::new(group.0, group.1), status, since.map(at))
}

/// An expected status, with its recheck time.
fn want(
    cluster: &str,
    group: (&str, i32),
    status: Status,
    since: Option<i64>,
    recheck: Option<i64>,
) -> ClusterStatus {
    ClusterStatus { recheck: recheck.map(at), ..has(cluster, group, status, since) }
}

/// A cluster new to the rollout.
fn new(cluster: &str, group: (&str, i32)) -> ClusterStatus {
    has(cluster, group, ToApply, None)
}

const G1: (&str, i32) = ("group1", 0);
const I1: (&str, i32) = ("", 1);
const I2: (&str, i32) = ("", 2);

fn int(n: i32) -> IntOrString {
    IntOrString::Int(n)
}

fn pct(p: &str) -> IntOrString {
    IntOrString::String(p.to_string())
}

/// The settings of one strategy, built up and then given a type.
#[derive(Clone, Debug, Default)]
struct Spec {
    deadline: Option<String>,
    soak: Option<String>,
    max_failures: Option<IntOrString>,
    max_concurrency: Option<IntOrString>,
    mandatory: Vec<MandatoryDecisionGroup>,
}

fn spec() -> Spec {
    Spec::default()
}

impl Spec {
    fn deadline(mut self, d: &str) -> Spec {
        self.deadline = Some(d.to_string());
        self
    }
    fn soak(mut self, d: &str) -> Spec {
        self.soak = Some(d.to_string());
        self
    }
    fn fails(mut self, v: IntOrString) -> Spec {
        self.max_failures = Some(v);
        self
    }
    fn window(mut self, v: IntOrString) -> Spec {
        self.max_concurrency = Some(v);
        self
    }
    fn mandatory(mut self, name: &str) -> Spec {
        let group = MandatoryDecisionGroup { group_name: Some(name.into()), group_index: None };
        self.mandatory.push(group);
        self
    }
    fn mandatory_index(mut self, index: i32) -> Spec {
        let group = MandatoryDecisionGroup { group_name: None, group_index: Some(index) };
        self.mandatory.push(group);
        self
    }

    fn all(self) -> RolloutStrategy {
        let all = RolloutConfig {
            min_success_time: self.soak,
            progress_deadline: self.deadline,
            max_failures: self.max_failures,
        };
        RolloutStrategy { type_: Some(ROLLOUT_ALL.into()), all: Some(all), ..Default::default() }
    }

    fn progressive(self) -> RolloutStrategy {
        let progressive = RolloutProgressive {
            min_success_time: self.soak,
            progress_deadline: self.deadline,
            max_failures: self.max_failures,
            mandatory_decision_groups: self.mandatory,
            max_concurrency: self.max_concurrency,
        };
        RolloutStrategy {
            type_: Some(ROLLOUT_PROGRESSIVE.into()),
            progressive: Some(progressive),
            ..Default::default()
        }
    }

    fn per_group(self) -> RolloutStrategy {
        let per_group = RolloutProgressivePerGroup {
            min_success_time: self.soak,
            progress_deadline: self.deadline,
            max_failures: self.max_failures,
            mandatory_decision_groups: self.mandatory,
        };
        RolloutStrategy {
            type_: Some(ROLLOUT_PROGRESSIVE_PER_GROUP.into()),
            progressive_per_group: Some(per_group),
            ..Default::default()
        }
    }
}

/// One row of a table: the input and the plan it must give.
struct Case {
    name: &'static str,
    strategy: RolloutStrategy,
    groups: Groups,
    existing: Vec<ClusterStatus>,
    expect: Plan,
}

/// The expected plan; `recheck_after` in seconds.
fn expect(
    to_rollout: Vec<ClusterStatus>,
    timed_out: Vec<ClusterStatus>,
    removed: Vec<ClusterStatus>,
    breach: bool,
    recheck_after: Option<u64>,
) -> Plan {
    Plan {
        to_rollout,
        timed_out,
        removed,
        max_failure_breach: breach,
        recheck_after: recheck_after.map(Duration::from_secs),
    }
}

fn run(cases: Vec<Case>) {
    for case in cases {
        let got = plan(&case.strategy, &case.groups, &case.existing, now())
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(got, case.expect, "{}", case.name);
    }
}

/// The statuses most sdk-go cases start from: c1 done a minute ago, c2 failed two minutes
/// ago, c3 progressing since a minute ago, all in `group1`.
fn done_failed_applying() -> Vec<ClusterStatus> {
    vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", G1, Progressing, Some(-60)),
    ]
}

/// Groups `group1` (0) c1–c2, (1) c3–c4, (2) c5–c6.
fn pairs() -> Groups {
    groups(&[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("", 1, &["cluster3", "cluster4"]),
        ("", 2, &["cluster5", "cluster6"]),
    ])
}
