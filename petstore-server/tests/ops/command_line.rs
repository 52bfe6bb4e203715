//! The command line as the binary presents it: `-h` and `--help` under
//! their headings, the shell completions (`completions bash|zsh|fish`),
//! the man page (`man`) and the flag table of docs/operating.md, each
//! checked against clap's own `Command` (the flags' one definition), so
//! none of them can lose, duplicate or invent a flag or a subcommand.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;

use clap::CommandFactory;
use petstore_server::cli::Cli;

/// clap's own heading for a flag that names none.
const NO_HEADING: &str = "Options";

/// One flag of the definitions: its long name, its heading, its
/// environment variable.
#[derive(Debug)]
struct Flag {
    long: String,
    heading: String,
    env: Option<String>,
}

/// Every flag of `cmd` itself (not of its subcommands).
fn flags_of(cmd: &clap::Command) -> Vec<Flag> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            Some(Flag {
                long: a.get_long()?.to_owned(),
                heading: a.get_help_heading().unwrap_or(NO_HEADING).to_owned(),
                env: a.get_env().map(|e| e.to_string_lossy().into_owned()),
            })
        })
        .collect()
}

/// The server's own flags, with clap's `--help` and `--version`.
fn server_flags() -> Vec<Flag> {
    let mut cmd = Cli::command();
    cmd.build();
    flags_of(&cmd)
}

/// The server's flags that are not clap's own.
fn configuration_flags() -> Vec<Flag> {
    server_flags()
        .into_iter()
        .filter(|f| f.long != "help" && f.long != "version")
        .collect()
}

/// Every (sub)command's path, its subcommands' names and its flags,
/// through the whole tree.
fn every_command() -> Vec<(String, BTreeSet<String>, Vec<Flag>)> {
    fn walk(path: &str, cmd: &clap::Command, out: &mut Vec<(String, BTreeSet<String>, Vec<Flag>)>) {
        let subs = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        out.push((path.to_owned(), subs, flags_of(cmd)));
        for sub in cmd.get_subcommands() {
            walk(&format!("{path} {}", sub.get_name()), sub, out);
        }
    }
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = Vec::new();
    walk("petstore-server", &cmd, &mut out);
    out
}

fn run(args: &[&str]) -> String {
    let out = Command::new(common::BIN)
        .args(args)
        .env_remove("PETSTORE_ADDR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The long flag a help line is the entry of: a line that starts with
/// two spaces and a dash (a flag named inside another's help text is
/// never at that margin).
fn entry_flag(line: &str) -> Option<&str> {
    if !(line.starts_with("  -") || line.starts_with("      --")) {
        return None;
    }
    line.split_whitespace()
        .find_map(|w| w.trim_end_matches(',').strip_prefix("--"))
}

/// The help text's sections: each heading (a line `Heading:` at the left
/// margin) with the long flags of the entries under it.
fn help_sections(text: &str) -> Vec<(String, Vec<String>)> {
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(heading) = line.strip_suffix(':').filter(|_| !line.starts_with(' ')) {
            sections.push((heading.to_owned(), Vec::new()));
        } else if let Some(long) = entry_flag(line) {
            let (_, entries) = sections
                .last_mut()
                .unwrap_or_else(|| panic!("an entry before any heading: {line}"));
            entries.push(long.to_owned());
        }
    }
    sections
}

#[test]
fn help_lists_every_flag_once_under_its_heading() {
    let flags = server_flags();
    let headings: BTreeSet<&str> = flags.iter().map(|f| f.heading.as_str()).collect();
    for (flag, text) in [("-h", run(&["-h"])), ("--help", run(&["--help"]))] {
        let sections = help_sections(&text);
        for f in &flags {
            let found: Vec<&str> = sections
                .iter()
                .filter(|(_, entries)| entries.contains(&f.long))
                .map(|(heading, _)| heading.as_str())
                .collect();
            assert_eq!(
                found,
                [f.heading.as_str()],
                "{flag}: --{} must be listed once, under {:?}:\n{text}",
                f.long,
                f.heading
            );
        }
        let listed: usize = sections.iter().map(|(_, entries)| entries.len()).sum();
        assert_eq!(
            listed,
            flags.len(),
            "{flag}: entries beyond the flags:\n{text}"
        );
        for heading in &headings {
            assert!(
                sections.iter().any(|(h, _)| h == heading),
                "{flag}: no heading {heading:?}:\n{text}"
            );
        }
    }
    // `-h`: a line of help a flag (beside it, or under it where clap
    // finds the flags' column too wide), its environment variable on it.
    let short = run(&["-h"]);
    let lines: Vec<&str> = short.lines().collect();
    for f in &flags {
        let at = lines
            .iter()
            .position(|l| entry_flag(l) == Some(f.long.as_str()))
            .unwrap_or_else(|| panic!("-h has no line for --{}:\n{short}", f.long));
        let entry: Vec<&str> = std::iter::once(lines[at])
            .chain(
                lines[at + 1..]
                    .iter()
                    .copied()
                    .take_while(|l| entry_flag(l).is_none() && l.starts_with("   ")),
            )
            .collect();
        assert!(
            entry.len() <= 2,
            "-h: --{} takes more than a line: {entry:?}",
            f.long
        );
        if let Some(env) = &f.env {
            assert!(
                entry.concat().contains(&format!("[env: {env}=")),
                "-h: --{} does not show {env}: {entry:?}",
                f.long
            );
        }
    }
}

#[test]
fn every_configuration_flag_has_a_heading_and_an_environment_variable() {
    // A flag left under clap's bare "Options" heading, or configurable
    // only on the command line (a container is configured by its
    // environment), is a flag someone forgot to place.
    for f in configuration_flags() {
        assert_ne!(f.heading, NO_HEADING, "--{} has no help heading", f.long);
        let env = f
            .env
            .unwrap_or_else(|| panic!("--{} has no environment variable", f.long));
        assert!(env.starts_with("PETSTORE_"), "--{}: {env}", f.long);
    }
}

/// The words of a completion script: runs of letters, digits, `-` and `_`.
fn words(script: &str) -> BTreeSet<&str> {
    script
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

#[test]
fn completions_name_every_flag_and_subcommand() {
    let commands = every_command();
    assert!(commands.len() > 5, "{commands:?}");
    for shell in ["bash", "zsh", "fish"] {
        let script = run(&["completions", shell]);
        let words = words(&script);
        for (path, subs, flags) in &commands {
            for sub in subs {
                assert!(
                    words.contains(sub.as_str()),
                    "{shell}: no subcommand {sub} of {path}"
                );
            }
            for f in flags {
                // fish names a long flag without its dashes: `-l addr`.
                let named = if shell == "fish" {
                    script.contains(&format!(" -l {} ", f.long))
                } else {
                    words.contains(format!("--{}", f.long).as_str())
                };
                assert!(named, "{shell}: no --{} of {path}", f.long);
            }
        }
    }
    let bogus = Command::new(common::BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(
        bogus.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn the_bash_completions_are_valid_bash() {
    let dir = common::TempDir::new();
    let path = dir.join("petstore-server.bash");
    std::fs::write(&path, run(&["completions", "bash"])).unwrap();
    let out = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The man page's text with roff's escaped dashes (`\-`) plain.
fn man_text() -> String {
    run(&["man"]).replace("\\-", "-")
}

#[test]
fn the_man_page_has_every_heading_and_every_flag_under_it() {
    let man = man_text();
    assert!(
        man.starts_with(".ie") || man.contains(".TH petstore-server 1"),
        "{man}"
    );
    // The page's sections, in order, each with its text.
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in man.lines() {
        if let Some(title) = line.strip_prefix(".SH ") {
            sections.push((title.trim_matches('"').to_owned(), String::new()));
        } else if let Some((_, text)) = sections.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    for f in server_flags() {
        let title = if f.heading == NO_HEADING {
            "OPTIONS".to_owned()
        } else {
            f.heading.to_uppercase()
        };
        let (_, text) = sections
            .iter()
            .find(|(t, _)| *t == title)
            .unwrap_or_else(|| panic!("the man page has no section {title}:\n{man}"));
        let entry = format!("\\fB--{}\\fR", f.long);
        assert!(
            text.contains(&entry),
            "--{} is not under {title}:\n{text}",
            f.long
        );
        if let Some(env) = &f.env {
            assert!(text.contains(env.as_str()), "{env} is not under {title}");
        }
    }
    let (_, subcommands) = sections
        .iter()
        .find(|(t, _)| t == "SUBCOMMANDS")
        .unwrap_or_else(|| panic!("no SUBCOMMANDS section:\n{man}"));
    for sub in Cli::command().get_subcommands() {
        assert!(
            subcommands.contains(&format!("petstore-server-{}", sub.get_name())),
            "{} is not among the subcommands:\n{subcommands}",
            sub.get_name()
        );
    }
}

/// The long flags in the first column of docs/operating.md's flag table.
fn documented_flags() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operating.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let table = doc
        .split("## Flags, commands, signals")
        .nth(1)
        .expect("docs/operating.md has its section \"Flags, commands, signals\"");
    let mut flags = BTreeSet::new();
    let mut in_table = false;
    for line in table.lines() {
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let first = line.split('|').nth(1).unwrap_or_default();
        for word in first.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if let Some(long) = word.strip_prefix("--").filter(|l| l.len() > 1) {
                flags.insert(long.to_owned());
            }
        }
    }
    flags
}

#[test]
fn the_docs_flag_table_lists_exactly_the_flags() {
    let defined: BTreeSet<String> = configuration_flags().into_iter().map(|f| f.long).collect();
    let documented = documented_flags();
    let undocumented: Vec<_> = defined.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&defined).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/operating.md's flag table lacks {undocumented:?} and names flags the server does not have: {stale:?}"
    );
    // Each subcommand is described there too.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operating.md"))
        .unwrap();
    for sub in Cli::command().get_subcommands() {
        assert!(
            doc.contains(&format!("petstore-server {}", sub.get_name())),
            "docs/operating.md does not describe `petstore-server {}`",
            sub.get_name()
        );
    }
}
