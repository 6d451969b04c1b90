use super::*;
use crate::framework::Code;
use crate::model::testing::{container, NodeBuilder, PodBuilder};

fn plugin(args: serde_json::Value) -> NodeResourcesFit {
    let args: FitArgs = ArgsError::decode(&args).unwrap();
    let strategy_args = args.scoring_strategy.unwrap_or_default();
    NodeResourcesFit {
        ignored_resources: args.ignored_resources.unwrap_or_default(),
        ignored_groups: args.ignored_resource_groups.unwrap_or_default(),
        resources: checked_resources(strategy_args.resources.clone(), "r").unwrap(),
        strategy: ScoringStrategy::from_args(&strategy_args).unwrap(),
    }
}

/// A node of 10 cpus, 20 bytes of memory and 32 pods, already running `used`.
fn node(used: &[Arc<PodInfo>]) -> NodeInfo {
    NodeBuilder::new("n")
        .capacity("10", "20", 32)
        .allocatable("example.com/gpu", "1")
        .info_with(used)
}

#[test]
fn filter_table() {
    let used = PodBuilder::new("used").req("5", "19").info();
    let cases: Vec<(&str, PodBuilder, Vec<&str>)> = vec![
        ("no requests fit anywhere", PodBuilder::new("p"), vec![]),
        ("fits", PodBuilder::new("p").req("5", "1"), vec![]),
        (
            "too much cpu",
            PodBuilder::new("p").req("6", "1"),
            vec!["Insufficient cpu"],
        ),
        (
            "too much of both",
            PodBuilder::new("p").req("6", "2"),
            vec!["Insufficient cpu", "Insufficient memory"],
        ),
        (
            "init container counted as the max",
            PodBuilder::new("p")
                .req("1", "1")
                .container(container("c2", "1", "0")),
            vec![],
        ),
        (
            "extended resource fits",
            PodBuilder::new("p").extended("example.com/gpu", "1"),
            vec![],
        ),
        (
            "extended resource lacking",
            PodBuilder::new("p").extended("example.com/gpu", "2"),
            vec!["Insufficient example.com/gpu"],
        ),
        (
            "unknown extended resource",
            PodBuilder::new("p").extended("example.com/fpga", "1"),
            vec!["Insufficient example.com/fpga"],
        ),
    ];
    let node = node(&[used]);
    for (name, pod, want) in cases {
        let status = plugin(serde_json::Value::Null).filter(&CycleState::new(), &pod.info(), &node);
        let got: Vec<String> = status.reasons.iter().map(|r| r.to_string()).collect();
        assert_eq!(got, want, "{name}");
        let code = if want.is_empty() {
            Code::Success
        } else {
            Code::Unschedulable
        };
        assert_eq!(status.code, code, "{name}");
    }
}

#[test]
fn init_containers_and_overhead_are_counted() {
    let mut pod = PodBuilder::new("p").req("1", "1").build();
    let spec = pod.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![container("init", "11", "1")]);
    let info = PodInfo::new(Arc::new(pod));
    let status = plugin(serde_json::Value::Null).filter(&CycleState::new(), &info, &node(&[]));
    assert_eq!(status.message(), "Insufficient cpu");
    let mut pod = PodBuilder::new("p").req("9", "1").build();
    pod.spec.as_mut().unwrap().overhead = Some(crate::model::testing::resource_list("2", ""));
    let status = plugin(serde_json::Value::Null).filter(
        &CycleState::new(),
        &PodInfo::new(Arc::new(pod)),
        &node(&[]),
    );
    assert_eq!(status.message(), "Insufficient cpu");
}

#[test]
fn allocatable_pods_are_a_limit() {
    let full = NodeBuilder::new("n")
        .capacity("10", "20", 1)
        .info_with(&[PodBuilder::new("a").info()]);
    let status = plugin(serde_json::Value::Null).filter(
        &CycleState::new(),
        &PodBuilder::new("p").info(),
        &full,
    );
    assert_eq!(status.message(), "Too many pods");
}

#[test]
fn ignored_extended_resources_and_groups() {
    let pod = PodBuilder::new("p")
        .extended("example.com/fpga", "1")
        .info();
    for args in [
        serde_json::json!({"ignoredResources": ["example.com/fpga"]}),
        serde_json::json!({"ignoredResourceGroups": ["example.com"]}),
    ] {
        assert!(plugin(args)
            .filter(&CycleState::new(), &pod, &node(&[]))
            .is_success());
    }
}

#[test]
fn least_allocated_prefers_emptier_nodes_counting_defaults() {
    let fit = plugin(serde_json::Value::Null);
    // 4 cpus / 8Gi; one pod with no requests counts as 100m / 200Mi.
    let empty = NodeBuilder::new("empty")
        .capacity("4", "8Gi", 110)
        .info_with(&[]);
    let busy = NodeBuilder::new("busy")
        .capacity("4", "8Gi", 110)
        .info_with(&[PodBuilder::new("a").req("2", "4Gi").info()]);
    let pod = PodBuilder::new("p").info();
    let mut state = CycleState::new();
    fit.pre_score(&mut state, &pod, &[], &Snapshot::default());
    let empty_score = fit.score(&state, &pod, &empty).unwrap();
    let busy_score = fit.score(&state, &pod, &busy).unwrap();
    // empty: cpu (4000-100)*100/4000 = 97, memory (8192-200)*100/8192 = 97.
    assert_eq!(empty_score, 97);
    // busy: cpu (4000-2100)*100/4000 = 47, memory (8192-4296)*100/8192 = 47.
    assert_eq!(busy_score, 47);
}

#[test]
fn bad_args_name_the_field() {
    let decode = |args: serde_json::Value| -> ArgsError {
        let context = PluginContext {
            args: &args,
            lister: Arc::new(crate::framework::StaticLister::default()),
        };
        NodeResourcesFit::factory(&context).err().expect("refused")
    };
    assert_eq!(
        decode(serde_json::json!({"scoringStrategy": {"type": "Bogus"}})).field,
        "scoringStrategy.type"
    );
    assert_eq!(
        decode(
            serde_json::json!({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}})
        )
        .field,
        "scoringStrategy.resources[0].weight"
    );
    assert!(decode(serde_json::json!({"unknown": 1}))
        .message
        .contains("unknown field"));
}
