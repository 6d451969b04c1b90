//! What `kubectl exec` runs in a simulated container: no process exists,
//! so a few everyday commands answer from the pod's spec (`echo`,
//! `hostname`, `env`/`printenv`, `cat` of stdin or /etc/hostname, `date`,
//! `ls`, `pwd`, `whoami`, `true`, `false`, `sleep`, `exit`, and `sh -c`
//! over those); anything else fails as a runtime fails to find an
//! executable.

use std::time::Duration;

/// What the container offers a command.
pub struct Container {
    pub hostname: String,
    /// Its environment: the spec's literal values and HOSTNAME.
    pub env: Vec<(String, String)>,
}

/// What running a command does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// Writes, then exits with the code.
    Done {
        stdout: String,
        stderr: String,
        code: i32,
    },
    /// Copies stdin to stdout until stdin closes, then exits 0.
    Echo,
    /// Waits, then exits 0.
    Sleep(Duration),
}

/// The exit code of a command that could not be found.
pub const NOT_FOUND: i32 = 127;
/// The longest `sleep` honoured: a test's command, not a daemon.
const LONGEST_SLEEP: Duration = Duration::from_secs(3600);

fn out(stdout: impl Into<String>) -> Run {
    Run::Done {
        stdout: stdout.into(),
        stderr: String::new(),
        code: 0,
    }
}

fn fail(stderr: impl Into<String>, code: i32) -> Run {
    Run::Done {
        stdout: String::new(),
        stderr: stderr.into(),
        code,
    }
}

/// What `command` does in `container`.
pub fn run(command: &[String], container: &Container) -> Run {
    let Some((program, args)) = command.split_first() else {
        return fail("no command given\n", NOT_FOUND);
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    match name {
        "sh" | "bash" | "ash" | "dash" => shell(args, container),
        "echo" => echo(args),
        "hostname" => out(format!("{}\n", container.hostname)),
        "cat" if args.is_empty() || args == ["-"] => Run::Echo,
        "cat" if args.iter().all(|a| a == "/etc/hostname") => {
            out(format!("{}\n", container.hostname).repeat(args.len()))
        }
        "cat" => fail(format!("cat: {}: No such file or directory\n", args[0]), 1),
        "env" if args.is_empty() => out(environment(container)),
        "printenv" if args.is_empty() => out(environment(container)),
        "printenv" => printenv(args, container),
        "date" => out(format!("{}\n", chrono::Utc::now().format("%a %b %e %H:%M:%S UTC %Y"))),
        "ls" => out("bin\ndev\netc\nhome\nproc\nroot\nsys\ntmp\nusr\nvar\n"),
        "pwd" => out("/\n"),
        "whoami" => out("root\n"),
        "true" => out(""),
        "false" => fail("", 1),
        "exit" => fail("", args.first().and_then(|c| c.parse().ok()).unwrap_or(0) & 0xff),
        "sleep" => sleep(args),
        _ => fail(
            format!(
                "OCI runtime exec failed: exec failed: unable to start container process: exec: \"{program}\": executable file not found in $PATH: unknown\n"
            ),
            NOT_FOUND,
        ),
    }
}

/// `sh -c 'script'`: the script's words run as one command; a bare shell
/// echoes its input (as `cat` would, close enough for a probe).
fn shell(args: &[String], container: &Container) -> Run {
    match args {
        [flag, script, ..] if flag == "-c" => match shell_words::split(script) {
            Ok(words) if !words.is_empty() => run(&words, container),
            Ok(_) => out(""),
            Err(_) => fail("sh: syntax error: unterminated quoted string\n", 2),
        },
        [] => Run::Echo,
        _ => fail("sh: only -c 'command' is simulated\n", 2),
    }
}

fn echo(args: &[String]) -> Run {
    match args.split_first() {
        Some((flag, rest)) if flag == "-n" => out(rest.join(" ")),
        _ => out(format!("{}\n", args.join(" "))),
    }
}

fn environment(container: &Container) -> String {
    container
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

fn printenv(names: &[String], container: &Container) -> Run {
    let values: Vec<&String> = names
        .iter()
        .filter_map(|n| container.env.iter().find(|(k, _)| k == n).map(|(_, v)| v))
        .collect();
    let stdout: String = values.iter().map(|v| format!("{v}\n")).collect();
    let code = if values.len() == names.len() { 0 } else { 1 };
    Run::Done {
        stdout,
        stderr: String::new(),
        code,
    }
}

fn sleep(args: &[String]) -> Run {
    match args
        .first()
        .and_then(|a| a.trim_end_matches('s').parse::<f64>().ok())
    {
        Some(seconds) if seconds >= 0.0 && seconds.is_finite() => {
            Run::Sleep(Duration::from_secs_f64(seconds).min(LONGEST_SLEEP))
        }
        _ => fail("sleep: invalid time interval\n", 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container() -> Container {
        Container {
            hostname: "web-1".into(),
            env: vec![
                ("HOSTNAME".into(), "web-1".into()),
                ("MODE".into(), "test".into()),
            ],
        }
    }

    fn words(text: &str) -> Vec<String> {
        shell_words::split(text).unwrap()
    }

    #[test]
    fn everyday_commands_answer_from_the_spec() {
        let c = container();
        assert_eq!(run(&words("echo hello world"), &c), out("hello world\n"));
        assert_eq!(run(&words("hostname"), &c), out("web-1\n"));
        assert_eq!(run(&words("printenv MODE"), &c), out("test\n"));
        assert_eq!(run(&words("env"), &c), out("HOSTNAME=web-1\nMODE=test\n"));
        assert_eq!(run(&words("sh -c 'echo $0 ok'"), &c), out("$0 ok\n"));
        assert_eq!(run(&words("/bin/sh -c 'exit 3'"), &c), fail("", 3));
        assert_eq!(run(&words("cat"), &c), Run::Echo);
        assert_eq!(
            run(&words("sleep 2"), &c),
            Run::Sleep(Duration::from_secs(2))
        );
        assert_eq!(run(&words("false"), &c), fail("", 1));
    }

    #[test]
    fn unknown_commands_fail_as_a_runtime_fails() {
        let Run::Done { stderr, code, .. } = run(&words("nginx -s reload"), &container()) else {
            panic!("not done");
        };
        assert_eq!(code, NOT_FOUND);
        assert!(
            stderr.contains("\"nginx\": executable file not found in $PATH"),
            "{stderr}"
        );
        assert_eq!(
            run(&[], &container()),
            fail("no command given\n", NOT_FOUND)
        );
    }
}
