//! The rollout library against sdk-go's own table (`rollout_test.go`, ported case by case), the
//! worked example of ocm-wave2.md §1.4, the `maxFailures` deviation, errors, and properties
//! over random placements.

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

/// The `All` statuses of sdk-go: two in `group1`, three in group 1.
fn all_statuses() -> Vec<ClusterStatus> {
    vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", I1, Progressing, Some(-120)),
        has("cluster4", I1, Failed, Some(-60)),
        has("cluster5", I1, Progressing, Some(-60)),
    ]
}

#[test]
fn all_matches_sdk_go() {
    let two = groups(&[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("", 1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
    ]);
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    let c3_timed_out = want("cluster3", I1, TimeOut, Some(-120), Some(-30));
    run(vec![
        Case {
            name: "all, 90s, nothing applied yet",
            strategy: spec().deadline("90s").all(),
            groups: two.clone(),
            existing: vec![],
            expect: expect(
                vec![
                    new("cluster1", G1),
                    new("cluster2", G1),
                    new("cluster3", I1),
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "all, 90s",
            strategy: spec().deadline("90s").all(),
            groups: two,
            existing: all_statuses(),
            expect: expect(
                vec![
                    want("cluster4", I1, Failed, Some(-60), Some(30)),
                    want("cluster5", I1, Progressing, Some(-60), Some(30)),
                    new("cluster6", I1),
                ],
                vec![c2_timed_out.clone(), c3_timed_out.clone()],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "all, 90s, cluster added",
            strategy: spec().deadline("90s").all(),
            groups: groups(&[
                ("group1", 0, &["cluster1", "cluster2", "cluster7"]),
                ("", 1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
            ]),
            existing: all_statuses(),
            expect: expect(
                vec![
                    want("cluster4", I1, Failed, Some(-60), Some(30)),
                    want("cluster5", I1, Progressing, Some(-60), Some(30)),
                    new("cluster6", I1),
                    new("cluster7", G1),
                ],
                vec![c2_timed_out, c3_timed_out.clone()],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "all, 90s, clusters removed",
            strategy: spec().deadline("90s").all(),
            groups: groups(&[("group1", 0, &["cluster1"]), ("", 1, &["cluster3", "cluster5"])]),
            existing: all_statuses(),
            expect: expect(
                vec![want("cluster5", I1, Progressing, Some(-60), Some(30))],
                vec![c3_timed_out],
                vec![
                    has("cluster2", G1, Failed, Some(-120)),
                    has("cluster4", I1, Failed, Some(-60)),
                ],
                false,
                Some(30),
            ),
        },
    ]);
}

/// sdk-go's statuses of c1–c10 with c1 progressing and the rest waiting (c10 in no decision).
fn mostly_waiting() -> Vec<ClusterStatus> {
    let mut existing = vec![has("cluster1", G1, Progressing, Some(-60))];
    existing.extend(["cluster2", "cluster3"].map(|c| has(c, G1, ToApply, None)));
    existing.extend(["cluster4", "cluster5", "cluster6"].map(|c| has(c, I1, ToApply, None)));
    existing.extend(
        ["cluster7", "cluster8", "cluster9", "cluster10"].map(|c| has(c, I2, ToApply, None)),
    );
    existing
}

#[test]
fn progressive_windows_match_sdk_go() {
    let c1_progressing = want("cluster1", G1, Progressing, Some(-60), Some(30));
    let c10_removed = has("cluster10", I2, ToApply, None);
    let waiting = |cluster: &str, group| has(cluster, group, ToApply, None);
    run(vec![
        Case {
            name: "progressive, 90s, window 2, nothing applied yet",
            strategy: spec().deadline("90s").window(int(2)).progressive(),
            groups: two_groups(),
            existing: vec![],
            expect: expect(
                vec![new("cluster1", G1), new("cluster2", G1)],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "progressive, 90s, window 4, statuses ToApply",
            strategy: spec().deadline("90s").window(int(4)).progressive(),
            groups: three_groups(),
            existing: mostly_waiting(),
            expect: expect(
                vec![
                    c1_progressing.clone(),
                    waiting("cluster2", G1),
                    waiting("cluster3", G1),
                    waiting("cluster4", I1),
                ],
                vec![],
                vec![c10_removed.clone()],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, 90s, maxConcurrency not set",
            strategy: spec().deadline("90s").progressive(),
            groups: three_groups(),
            existing: mostly_waiting(),
            expect: expect(
                vec![
                    c1_progressing,
                    waiting("cluster2", G1),
                    waiting("cluster3", G1),
                    waiting("cluster4", I1),
                    waiting("cluster5", I1),
                    waiting("cluster6", I1),
                    waiting("cluster7", I2),
                    waiting("cluster8", I2),
                    waiting("cluster9", I2),
                ],
                vec![],
                vec![c10_removed],
                false,
                Some(30),
            ),
        },
    ]);
}

#[test]
fn progressive_failures_match_sdk_go() {
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    let c3_progressing = want("cluster3", G1, Progressing, Some(-60), Some(30));
    let soaking = vec![
        has("cluster1", G1, Succeeded, Some(-30)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", G1, Progressing, Some(-30)),
    ];
    let six = groups(&[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("", 1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
    ]);
    let none_statuses = vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", I1, Progressing, Some(-60)),
    ];
    run(vec![
        Case {
            name: "progressive, 90s, no maxFailures",
            strategy: spec().deadline("90s").window(int(2)).progressive(),
            groups: two_groups(),
            existing: done_failed_applying(),
            expect: expect(
                vec![c3_progressing.clone()],
                vec![c2_timed_out.clone()],
                vec![],
                true,
                Some(30),
            ),
        },
        Case {
            name: "progressive, 90s, maxFailures 100%, minSuccessTime 60s",
            strategy: spec()
                .deadline("90s")
                .fails(pct("100%"))
                .soak("1m")
                .window(int(2))
                .progressive(),
            groups: two_groups(),
            existing: soaking,
            expect: expect(
                vec![
                    want("cluster1", G1, Succeeded, Some(-30), Some(30)),
                    want("cluster3", G1, Progressing, Some(-30), Some(60)),
                ],
                vec![c2_timed_out.clone()],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, mixed deadlines and soaks",
            strategy: spec()
                .deadline("90s")
                .fails(pct("100%"))
                .soak("1m")
                .window(int(4))
                .progressive(),
            groups: groups(&[("group1", 0, &["cluster1", "cluster2", "cluster3", "cluster4"])]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-30)),
                has("cluster2", G1, Progressing, Some(-60)),
                has("cluster3", G1, Progressing, Some(-30)),
                has("cluster4", G1, Succeeded, Some(-120)),
            ],
            expect: expect(
                vec![
                    want("cluster1", G1, Succeeded, Some(-30), Some(30)),
                    want("cluster2", G1, Progressing, Some(-60), Some(30)),
                    want("cluster3", G1, Progressing, Some(-30), Some(60)),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, 90s, maxFailures 1",
            strategy: spec().deadline("90s").fails(int(1)).window(int(2)).progressive(),
            groups: two_groups(),
            existing: done_failed_applying(),
            expect: expect(
                vec![c3_progressing.clone(), new("cluster4", I1)],
                vec![c2_timed_out.clone()],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, deadline 0s, maxFailures 3",
            strategy: spec().deadline("0s").fails(int(3)).window(int(2)).progressive(),
            groups: two_groups(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-30)),
                has("cluster2", G1, Progressing, Some(-30)),
                has("cluster3", G1, Progressing, Some(-30)),
            ],
            expect: expect(
                vec![new("cluster4", I1), new("cluster5", I1)],
                vec![
                    want("cluster2", G1, TimeOut, Some(-30), Some(-30)),
                    want("cluster3", G1, TimeOut, Some(-30), Some(-30)),
                ],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "progressive, no deadline, window 50%, maxFailures 100%",
            strategy: spec().deadline("None").fails(pct("100%")).window(pct("50%")).progressive(),
            groups: six.clone(),
            existing: none_statuses.clone(),
            expect: expect(
                vec![
                    want("cluster2", G1, Failed, Some(-120), None),
                    want("cluster3", I1, Progressing, Some(-60), None),
                    new("cluster4", I1),
                ],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "progressive, no deadline, window 50%, maxFailures 0%",
            strategy: spec().deadline("None").fails(pct("0%")).window(pct("50%")).progressive(),
            groups: six,
            existing: none_statuses,
            expect: expect(
                vec![
                    want("cluster2", G1, Failed, Some(-120), None),
                    want("cluster3", I1, Progressing, Some(-60), None),
                ],
                vec![],
                vec![],
                true,
                None,
            ),
        },
        Case {
            name: "progressive, 90s, maxFailures 100%, cluster removed",
            strategy: spec().deadline("90s").fails(pct("100%")).window(int(2)).progressive(),
            groups: groups(&[
                ("group1", 0, &["cluster2", "cluster3"]),
                ("", 1, &["cluster4", "cluster5", "cluster6"]),
            ]),
            existing: done_failed_applying(),
            expect: expect(
                vec![c3_progressing, new("cluster4", I1)],
                vec![c2_timed_out],
                vec![has("cluster1", G1, Succeeded, Some(-60))],
                false,
                Some(30),
            ),
        },
    ]);
}

/// Groups `group1` (0) c1–c2, (1) c3–c4, (2) c5–c6.
fn pairs() -> Groups {
    groups(&[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("", 1, &["cluster3", "cluster4"]),
        ("", 2, &["cluster5", "cluster6"]),
    ])
}

#[test]
fn progressive_mandatory_groups_match_sdk_go() {
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    run(vec![
        Case {
            name: "progressive, mandatory group1, 90s",
            strategy: spec().mandatory("group1").deadline("90s").window(int(3)).progressive(),
            groups: two_groups(),
            existing: done_failed_applying(),
            expect: expect(
                vec![want("cluster3", G1, Progressing, Some(-60), Some(30))],
                vec![c2_timed_out],
                vec![],
                true,
                Some(30),
            ),
        },
        Case {
            name: "progressive, mandatory group failed",
            strategy: spec().mandatory("group1").deadline("90s").window(int(3)).progressive(),
            groups: pairs(),
            existing: vec![
                has("cluster1", G1, Failed, Some(-120)),
                has("cluster2", G1, Failed, Some(-60)),
            ],
            expect: expect(
                vec![want("cluster2", G1, Failed, Some(-60), Some(30))],
                vec![want("cluster1", G1, TimeOut, Some(-120), Some(-30))],
                vec![],
                true,
                Some(30),
            ),
        },
        Case {
            name: "progressive, mandatory group succeeded",
            strategy: spec().mandatory("group1").deadline("").window(int(3)).progressive(),
            groups: pairs(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Succeeded, Some(-120)),
            ],
            expect: expect(
                vec![new("cluster3", I1), new("cluster4", I1), new("cluster5", I2)],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "progressive, mandatory group succeeded, clusters added after the rollout",
            strategy: spec().mandatory("group1").deadline("90s").window(int(3)).progressive(),
            groups: groups(&[
                ("group1", 0, &["cluster1", "cluster2", "cluster7"]),
                ("", 1, &["cluster3", "cluster4", "cluster8"]),
                ("", 2, &["cluster5", "cluster6", "cluster9"]),
            ]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Succeeded, Some(-60)),
                has("cluster3", I1, Succeeded, Some(-60)),
                has("cluster4", I1, Progressing, Some(-60)),
                has("cluster5", I2, Progressing, Some(-60)),
            ],
            // The mandatory phase classifies every status, so c4 and c5 come with c7.
            expect: expect(
                vec![
                    want("cluster4", I1, Progressing, Some(-60), Some(30)),
                    want("cluster5", I2, Progressing, Some(-60), Some(30)),
                    new("cluster7", G1),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, mandatory group1, 90s, cluster removed from it",
            strategy: spec().mandatory("group1").deadline("90s").window(int(2)).progressive(),
            groups: groups(&[
                ("group1", 0, &["cluster1", "cluster3"]),
                ("", 1, &["cluster4", "cluster5", "cluster6"]),
            ]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-120)),
                has("cluster3", G1, Succeeded, Some(-60)),
            ],
            expect: expect(
                vec![new("cluster4", I1), new("cluster5", I1)],
                vec![],
                vec![has("cluster2", G1, Failed, Some(-120))],
                false,
                None,
            ),
        },
    ]);
}

#[test]
fn per_group_matches_sdk_go() {
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    let first_done_but_c2 = vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", G1, Succeeded, Some(-60)),
    ];
    let mut second_done = first_done_but_c2.clone();
    second_done
        .extend(["cluster4", "cluster5", "cluster6"].map(|c| has(c, I1, Succeeded, Some(-60))));
    let mut waiting = vec![has("cluster1", G1, Progressing, Some(-60))];
    waiting.extend(["cluster2", "cluster3"].map(|c| has(c, G1, ToApply, None)));
    waiting.extend(["cluster4", "cluster5", "cluster6"].map(|c| has(c, I1, ToApply, None)));
    run(vec![
        Case {
            name: "per group, 90s, nothing applied yet",
            strategy: spec().deadline("90s").per_group(),
            groups: two_groups(),
            existing: vec![],
            expect: expect(
                vec![new("cluster1", G1), new("cluster2", G1), new("cluster3", G1)],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "per group, 90s, statuses ToApply",
            strategy: spec().deadline("90s").per_group(),
            groups: two_groups(),
            existing: waiting,
            expect: expect(
                vec![
                    want("cluster1", G1, Progressing, Some(-60), Some(30)),
                    new("cluster2", G1),
                    new("cluster3", G1),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "per group, 90s",
            strategy: spec().deadline("90s").per_group(),
            groups: two_groups(),
            existing: done_failed_applying(),
            expect: expect(
                vec![want("cluster3", G1, Progressing, Some(-60), Some(30))],
                vec![c2_timed_out.clone()],
                vec![],
                true,
                Some(30),
            ),
        },
        Case {
            name: "per group, 90s, first group timed out, maxFailures 2",
            strategy: spec().deadline("90s").fails(int(2)).per_group(),
            groups: three_groups(),
            existing: first_done_but_c2.clone(),
            expect: expect(
                vec![new("cluster4", I1), new("cluster5", I1), new("cluster6", I1)],
                vec![c2_timed_out.clone()],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "per group, 90s, first group timed out, second succeeded",
            strategy: spec().deadline("90s").fails(int(2)).per_group(),
            groups: three_groups(),
            existing: second_done,
            expect: expect(
                vec![new("cluster7", I2), new("cluster8", I2), new("cluster9", I2)],
                vec![c2_timed_out],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "per group, no deadline, first group failing",
            strategy: spec().deadline("None").per_group(),
            groups: three_groups(),
            existing: first_done_but_c2.clone(),
            expect: expect(
                vec![want("cluster2", G1, Failed, Some(-120), None)],
                vec![],
                vec![],
                true,
                None,
            ),
        },
        Case {
            name: "per group, no deadline, one failing in the first group, maxFailures 2",
            strategy: spec().deadline("None").fails(int(2)).per_group(),
            groups: three_groups(),
            existing: first_done_but_c2,
            expect: expect(
                vec![
                    want("cluster2", G1, Failed, Some(-120), None),
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "per group, no deadline, two failing in the first group, maxFailures 30%",
            strategy: spec().deadline("None").fails(pct("30%")).per_group(),
            groups: three_groups(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-120)),
                has("cluster3", G1, Failed, Some(-120)),
            ],
            expect: expect(
                vec![
                    want("cluster2", G1, Failed, Some(-120), None),
                    want("cluster3", G1, Failed, Some(-120), None),
                ],
                vec![],
                vec![],
                true,
                None,
            ),
        },
        Case {
            name: "per group, minSuccessTime and mixed states",
            strategy: spec().deadline("90s").fails(pct("50%")).soak("1m").per_group(),
            groups: groups(&[
                ("group1", 0, &["cluster1", "cluster2", "cluster3"]),
                ("group2", 1, &["cluster4", "cluster5"]),
            ]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-30)),
                has("cluster2", G1, Succeeded, Some(-120)),
                has("cluster3", G1, Progressing, Some(-30)),
            ],
            expect: expect(
                vec![
                    want("cluster1", G1, Succeeded, Some(-30), Some(30)),
                    want("cluster3", G1, Progressing, Some(-30), Some(60)),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
    ]);
}

#[test]
fn per_group_mandatory_and_membership_changes_match_sdk_go() {
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    let first_done_but_c2 = vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", G1, Succeeded, Some(-60)),
    ];
    /// `group1` (0) holding c1 and c3, then `rest`.
    fn c1_c3(rest: &[(&str, i32, &[&str])]) -> Groups {
        let mut spec: Vec<(&str, i32, &[&str])> = vec![("group1", 0, &["cluster1", "cluster3"])];
        spec.extend_from_slice(rest);
        groups(&spec)
    }
    let c4_c6: (&str, i32, &[&str]) = ("", 1, &["cluster4", "cluster5", "cluster6"]);
    let c7_c9: (&str, i32, &[&str]) = ("", 2, &["cluster7", "cluster8", "cluster9"]);
    let next_group = vec![new("cluster4", I1), new("cluster5", I1), new("cluster6", I1)];
    run(vec![
        Case {
            name: "per group, mandatory group failing, 90s",
            strategy: spec().mandatory("group1").deadline("90s").per_group(),
            groups: two_groups(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-120)),
                has("cluster3", G1, Failed, Some(-120)),
            ],
            expect: expect(
                vec![],
                vec![c2_timed_out.clone(), want("cluster3", G1, TimeOut, Some(-120), Some(-30))],
                vec![],
                true,
                None,
            ),
        },
        Case {
            name: "per group, mandatory group failing one, 90s, maxFailures 2",
            strategy: spec().mandatory("group1").deadline("90s").fails(int(2)).per_group(),
            groups: three_groups(),
            existing: first_done_but_c2.clone(),
            expect: expect(vec![], vec![c2_timed_out], vec![], true, None),
        },
        Case {
            name: "per group, mandatory group succeeded, 90s",
            strategy: spec().mandatory("group1").deadline("90s").per_group(),
            groups: three_groups(),
            existing: ["cluster1", "cluster2", "cluster3"]
                .map(|c| has(c, G1, Succeeded, Some(-60)))
                .into(),
            expect: expect(next_group.clone(), vec![], vec![], false, None),
        },
        Case {
            name: "per group, 90s, cluster added after the rollout started",
            strategy: spec().deadline("90s").per_group(),
            groups: two_groups(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Succeeded, Some(-60)),
                has("cluster4", I1, Progressing, Some(-60)),
                has("cluster5", I1, Progressing, Some(-60)),
            ],
            expect: expect(
                vec![
                    want("cluster4", I1, Progressing, Some(-60), Some(30)),
                    want("cluster5", I1, Progressing, Some(-60), Some(30)),
                    new("cluster3", G1),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "per group, 90s, cluster removed after the rollout started",
            strategy: spec().deadline("90s").per_group(),
            groups: c1_c3(&[c4_c6]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-60)),
                has("cluster3", G1, Progressing, Some(-60)),
            ],
            expect: expect(
                vec![want("cluster3", G1, Progressing, Some(-60), Some(30))],
                vec![],
                vec![has("cluster2", G1, Failed, Some(-60))],
                false,
                Some(30),
            ),
        },
        Case {
            name: "per group, 90s, cluster removed while its group timed out",
            strategy: spec().deadline("90s").fails(int(2)).per_group(),
            groups: c1_c3(&[c4_c6]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-60)),
                has("cluster3", G1, Progressing, Some(-120)),
            ],
            expect: expect(
                next_group.clone(),
                vec![want("cluster3", G1, TimeOut, Some(-120), Some(-30))],
                vec![has("cluster2", G1, Failed, Some(-60))],
                false,
                None,
            ),
        },
        Case {
            name: "per group, mandatory group1, 90s, cluster removed from it",
            strategy: spec().mandatory("group1").deadline("90s").per_group(),
            groups: c1_c3(&[c4_c6, c7_c9]),
            existing: first_done_but_c2.clone(),
            expect: expect(
                next_group,
                vec![],
                vec![has("cluster2", G1, Failed, Some(-120))],
                false,
                None,
            ),
        },
    ]);
}

/// ocm-wave2.md §1.4: Progressive over c0..c9 in one group, window 3, maxFailures 1, soak 5m,
/// deadline 10m, followed round by round.
#[test]
fn worked_example_of_the_reference() {
    let strategy = spec().window(int(3)).fails(int(1)).soak("5m").deadline("10m").progressive();
    let names: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    let groups = Groups::new([(GroupKey::new("", 0), names)]);
    let g = ("", 0);

    let first = plan(&strategy, &groups, &[], now()).unwrap();
    assert_eq!(first.to_rollout, [new("c0", g), new("c1", g), new("c2", g)]);
    assert_eq!(first.recheck_after, None);

    // c0 succeeded 2 min ago (soaking), c1 progressing, c2 failed: the window is full.
    let round2 = [
        has("c0", g, Succeeded, Some(-120)),
        has("c1", g, Progressing, Some(-180)),
        has("c2", g, Failed, Some(-60)),
    ];
    let second = plan(&strategy, &groups, &round2, now()).unwrap();
    let held = |s: &ClusterStatus| s.cluster.as_str().to_owned();
    assert_eq!(second.to_rollout.iter().map(held).collect::<Vec<_>>(), ["c0", "c1", "c2"]);
    assert!(!second.max_failure_breach);
    assert_eq!(second.recheck_after, Some(Duration::from_secs(180)), "c0's soak ends first");

    // Three minutes on, c0's soak is over: one failure (c2) is tolerated, c3 joins.
    let later = at(180);
    let third = plan(&strategy, &groups, &round2, later).unwrap();
    assert_eq!(third.to_rollout.iter().map(held).collect::<Vec<_>>(), ["c1", "c2", "c3"]);
    assert!(!third.max_failure_breach);

    // c1 fails too: two failures breach the tolerance of one, so c4 never starts, and c3's
    // work that is still ToApply is left where it is.
    let round4 = [
        has("c0", g, Succeeded, Some(-120)),
        has("c1", g, Failed, Some(170)),
        has("c2", g, Failed, Some(-60)),
        has("c3", g, ToApply, None),
    ];
    let fourth = plan(&strategy, &groups, &round4, later).unwrap();
    assert_eq!(fourth.to_rollout.iter().map(held).collect::<Vec<_>>(), ["c1", "c2"]);
    assert!(fourth.max_failure_breach);
    assert!(fourth.timed_out.is_empty());
}

/// ocm-wave2.md §7: sdk-go reads a `maxFailures` above the population as 0; here it tolerates
/// every failure, and 0 stays 0.
#[test]
fn max_failures_above_the_population_tolerate_every_failure() {
    let groups = groups(&[("", 0, &["a", "b", "c"]), ("", 1, &["d", "e", "f"])]);
    let g0 = ("", 0);
    let existing =
        [has("a", g0, Failed, None), has("b", g0, Failed, None), has("c", g0, Succeeded, None)];

    // Progressive: 5 over 6 clusters is below the population, 7 is above it. sdk-go would
    // breach with 7 (read as 0) and add nothing; here both add d.
    for max_failures in [5, 7] {
        let strategy = spec().window(int(3)).fails(int(max_failures)).progressive();
        let plan = plan(&strategy, &groups, &existing, now()).unwrap();
        let rolled: Vec<_> = plan.to_rollout.iter().map(|s| s.cluster.as_str()).collect();
        assert_eq!(rolled, ["a", "b", "d"], "maxFailures {max_failures}");
        assert!(!plan.max_failure_breach, "maxFailures {max_failures}");
    }
    for zero in [int(0), int(-2), pct("0%")] {
        let strategy = spec().window(int(3)).fails(zero.clone()).progressive();
        let plan = plan(&strategy, &groups, &existing, now()).unwrap();
        assert!(plan.max_failure_breach, "{zero:?}");
        assert_eq!(plan.to_rollout.len(), 2, "{zero:?}: no new cluster");
    }

    // ProgressivePerGroup: 4 (and 150%) over a group of 3 tolerate both failures of group 0.
    for max_failures in [int(4), pct("150%")] {
        let strategy = spec().fails(max_failures.clone()).per_group();
        let plan = plan(&strategy, &groups, &existing, now()).unwrap();
        let new_ones: Vec<_> = plan
            .to_rollout
            .iter()
            .filter(|s| s.status == ToApply)
            .map(|s| s.cluster.as_str())
            .collect();
        assert_eq!(new_ones, ["d", "e", "f"], "{max_failures:?}");
        assert!(!plan.max_failure_breach, "{max_failures:?}");
    }
    let strict = plan(&spec().fails(int(0)).per_group(), &groups, &existing, now()).unwrap();
    assert!(strict.max_failure_breach);
}

#[test]
fn mandatory_groups_by_index_and_unknown_entries() {
    let groups = pairs();
    // Index 1 is mandatory: c3 and c4 first.
    let by_index = spec().mandatory_index(1).window(int(1)).progressive();
    let first = plan(&by_index, &groups, &[], now()).unwrap();
    assert_eq!(first.to_rollout, [new("cluster3", I1), new("cluster4", I1)]);
    // Unknown names and indexes are ignored: the window runs over everything.
    let unknown = spec().mandatory("nope").mandatory_index(9).window(int(1)).progressive();
    let plan = plan(&unknown, &groups, &[], now()).unwrap();
    assert_eq!(plan.to_rollout, [new("cluster1", G1)]);
}

#[test]
fn a_time_out_anywhere_holds_a_rollout_with_mandatory_groups() {
    // ocm-wave2.md §7: with mandatory groups configured, one timed-out cluster in a later group
    // stops everything.
    let groups = pairs();
    let existing = [
        has("cluster1", G1, Succeeded, Some(-600)),
        has("cluster2", G1, Succeeded, Some(-600)),
        has("cluster3", I1, Progressing, Some(-600)),
    ];
    let with = spec().mandatory("group1").deadline("5m").window(int(4)).progressive();
    let held = plan(&with, &groups, &existing, now()).unwrap();
    assert!(held.to_rollout.is_empty());
    assert_eq!(held.timed_out, [want("cluster3", I1, TimeOut, Some(-600), Some(-300))]);
    let without = spec().deadline("5m").window(int(4)).fails(int(1)).progressive();
    let moving = plan(&without, &groups, &existing, now()).unwrap();
    assert_eq!(moving.to_rollout.len(), 3, "c4, c5, c6 start");
}

#[test]
fn timed_out_and_skipped_statuses_are_left_alone() {
    let groups = groups(&[("", 0, &["a", "b", "c"])]);
    let g = ("", 0);
    let existing = [has("a", g, TimeOut, Some(-10)), has("b", g, Skip, None)];
    let all = plan(&spec().deadline("1m").all(), &groups, &existing, now()).unwrap();
    assert_eq!(all.to_rollout, [new("c", g)]);
    assert!(all.timed_out.is_empty(), "only clusters that time out now are reported");
    // A TimeOut status still counts as a failure.
    let strict = spec().fails(int(0)).window(int(3)).progressive();
    let plan = plan(&strict, &groups, &existing, now()).unwrap();
    assert!(plan.max_failure_breach);
    assert!(plan.to_rollout.is_empty());
}

#[test]
fn strategy_errors_are_typed() {
    let groups = pairs();
    let fail = |s: RolloutStrategy| plan(&s, &groups, &[], now()).unwrap_err();
    let unknown = RolloutStrategy { type_: Some("Sometimes".into()), ..Default::default() };
    assert_eq!(fail(unknown), RolloutError::UnknownType("Sometimes".into()));
    assert_eq!(fail(RolloutStrategy::default()), RolloutError::UnknownType(String::new()));
    for bad in ["2d", "0", "2d0s", "10g"] {
        assert_eq!(fail(spec().deadline(bad).all()), RolloutError::DeadlineFormat(bad.into()));
    }
    assert_eq!(fail(spec().deadline("2d").all()).to_string(), "invalid timeout format");
    assert!(matches!(fail(spec().deadline("1hx").per_group()), RolloutError::Deadline(_)));
    assert!(matches!(fail(spec().soak("soon").progressive()), RolloutError::MinSuccessTime(_)));
    let bad_failures = fail(spec().fails(pct("many")).progressive());
    assert_eq!(
        bad_failures.to_string(),
        "failed to parse the provided maxFailures: 'many' is an invalid maximum threshold value: \
         string is not a percentage"
    );
    assert!(matches!(fail(spec().fails(pct("x%")).per_group()), RolloutError::MaxFailures(_)));
    assert!(matches!(fail(spec().window(pct("3")).progressive()), RolloutError::MaxConcurrency(_)));
    // `All` reads neither maxFailures nor minSuccessTime.
    let lenient = spec().fails(pct("many")).soak("soon").all();
    assert_eq!(plan(&lenient, &groups, &[], now()).unwrap().to_rollout.len(), 6);
}

#[test]
fn a_bad_window_is_not_read_while_mandatory_groups_roll() {
    // As sdk-go: maxConcurrency is parsed only once the mandatory groups are done.
    let groups = pairs();
    let strategy = spec().mandatory("group1").window(pct("3")).progressive();
    let plan = plan(&strategy, &groups, &[], now()).unwrap();
    assert_eq!(plan.to_rollout, [new("cluster1", G1), new("cluster2", G1)]);
}

#[test]
fn soaking_counts_from_now_without_a_transition_time() {
    let groups = groups(&[("", 0, &["a", "b"])]);
    let g = ("", 0);
    let existing = [has("a", g, Succeeded, None), has("b", g, Progressing, None)];
    let strategy = spec().soak("2m").deadline("5m").window(int(2)).progressive();
    let plan = plan(&strategy, &groups, &existing, now()).unwrap();
    assert_eq!(
        plan.to_rollout,
        [want("a", g, Succeeded, None, Some(120)), want("b", g, Progressing, None, Some(300))]
    );
    assert_eq!(plan.recheck_after, Some(Duration::from_secs(120)));
}
