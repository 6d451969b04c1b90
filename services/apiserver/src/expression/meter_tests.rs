//! The runtime bound: what runs past kube's limits stops with kube's
//! error, whatever CEL would make of the error, and what stays within
//! them means what it meant.

use cel::Value as Cel;

use super::cost::{Budget, EvalError, PER_CALL_LIMIT};
use super::{compile, Activation};

fn run_with(source: &str, self_value: Cel, budget: &mut Budget) -> Result<Cel, EvalError> {
    let expression = compile(source, &["self"]).map_err(EvalError::Failed)?;
    let activation = Activation::new().with("self", self_value);
    expression.evaluate(&activation, budget)
}

fn run(source: &str, self_value: Cel) -> Result<Cel, EvalError> {
    run_with(source, self_value, &mut Budget::default())
}

fn range(n: usize) -> String {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(", "))
}

#[test]
fn nested_loops_stop_at_the_per_call_limit() {
    let r = range(80);
    let nested = format!("{r}.all(a, {r}.all(b, {r}.all(c, a + b + c >= 0)))");
    assert_eq!(run(&nested, Cel::Null), Err(EvalError::CallLimit));
    // Absorbed by `||` or not, a stopped evaluation is stopped.
    assert_eq!(
        run(&format!("({nested}) || true"), Cel::Null),
        Err(EvalError::CallLimit)
    );
    let small = format!("{}.all(a, {}.all(b, a + b >= 0))", range(20), range(20));
    assert_eq!(run(&small, Cel::Null), Ok(Cel::Bool(true)));
}

#[test]
fn growing_strings_stop_before_they_are_made() {
    let seed = Cel::from("x".repeat(4096));
    let doubling = format!("[self]{}.size() > 0", ".map(s, s + s)".repeat(16));
    assert_eq!(run(&doubling, seed.clone()), Err(EvalError::CallLimit));
    let once = "[self].map(s, s + s)[0].size() == 8192";
    assert_eq!(run(once, seed.clone()), Ok(Cel::Bool(true)));
    // An empty needle puts the replacement between every two characters.
    let spread = "self.replace('', self).size() > 0";
    assert_eq!(run(spread, seed.clone()), Err(EvalError::CallLimit));
    let joined = "[self, self, self].join(self.replace('x', 'yy')) != ''";
    assert_eq!(run(joined, seed.clone()), Ok(Cel::Bool(true)));
    let wide = format!(
        "{}.map(i, 'a').join(self + self + self + self) != ''",
        range(2000)
    );
    assert_eq!(run(&wide, seed.clone()), Err(EvalError::CallLimit));
    let split = "self.split('').size() > 0";
    let long = Cel::from("y".repeat(2 * PER_CALL_LIMIT as usize));
    assert_eq!(run(split, long), Err(EvalError::CallLimit));
}

#[test]
fn copies_of_a_large_value_are_charged_by_its_size() {
    let large = Cel::from(
        (0..20_000)
            .map(|i| Cel::from(format!("item-{i}")))
            .collect::<Vec<_>>(),
    );
    // Each turn copies the whole list into the result.
    let copies = format!("{}.map(i, self).size() > 0", range(200));
    assert_eq!(run(&copies, large.clone()), Err(EvalError::CallLimit));
    assert_eq!(
        run("self.size() == 20000", large.clone()),
        Ok(Cel::Bool(true))
    );
    assert_eq!(
        run("self.exists(i, i == 'item-19999')", large),
        Ok(Cel::Bool(true))
    );
}

#[test]
fn the_budget_runs_out_across_evaluations() {
    let turns = range(2_000);
    let loop_of = format!("{turns}.all(a, a >= 0)");
    let mut budget = Budget::of(200_000);
    assert_eq!(
        run_with(&loop_of, Cel::Null, &mut budget),
        Ok(Cel::Bool(true))
    );
    let spent = 200_000 - budget.left();
    assert!(spent > 2_000 && spent < 50_000, "{spent}");
    let mut runs = 0;
    let stopped = loop {
        runs += 1;
        match run_with(&loop_of, Cel::Null, &mut budget) {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    assert_eq!(stopped, EvalError::OutOfBudget, "after {runs} more");
    assert!(stopped.stops_the_rest());
}

#[test]
fn metering_keeps_what_expressions_mean() {
    let list = Cel::from(vec![Cel::Int(1), Cel::Int(2), Cel::Int(3), Cel::Int(4)]);
    for (source, expected) in [
        ("self.map(x, x * 2) == [2, 4, 6, 8]", true),
        ("self.filter(x, x % 2 == 0) == [2, 4]", true),
        ("self.map(x, x > 2, x) == [3, 4]", true),
        ("self.exists_one(x, x == 3)", true),
        ("self.all(x, x > 0) && !self.exists(x, x > 4)", true),
        ("2 in self && !(7 in self)", true),
        ("type(self) == list && type(self[0]) == int", true),
        ("optional.of(self[0]).hasValue()", true),
        ("{'a': self[0]}.a == 1 && [self[1]][0] == 2", true),
        ("self.sum() == 10 && self.max() == 4", true),
        (
            "'a,b'.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b'",
            true,
        ),
        (
            "'aXbX'.replace('X', '') == 'ab' && 'aaa'.replace('a', 'b', 2) == 'bba'",
            true,
        ),
    ] {
        assert_eq!(
            run(source, list.clone()),
            Ok(Cel::Bool(expected)),
            "{source}"
        );
    }
    let missing = run("self[9] == 1", list).unwrap_err();
    assert!(matches!(missing, EvalError::Failed(_)), "{missing:?}");
}
