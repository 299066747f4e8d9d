"""Examples:

  source <(berth completion bash)        # this bash; add the line to ~/.bashrc to keep it
  berth completion bash > ~/.local/share/bash-completion/completions/berth
  berth completion zsh > "${fpath[1]}/_berth"   # or in ~/.zshrc, after compinit:
                                                #   source <(berth completion zsh)
  berth completion fish > ~/.config/fish/completions/berth.fish

Tab then completes berth's commands (`berth sta<Tab>`), each command's options (`berth queue
--<Tab>`), job ids where a command takes jobs (`berth logs <Tab>`: the daemon's jobs, with
their names and states in zsh and fish), GPU ids where it takes GPUs (`berth pause <Tab>`,
`--gpu-ids <Tab>`), `berth admin`'s actions and `berth help`'s topics. The commands and
their options are read from berth itself when the script is made (a newer berth: make the
script again, or source it at each start as above); job and GPU ids are asked for at each Tab
(`berth __complete jobs|gpus`, quick and silent without a daemon or a GPU).
"""

from __future__ import annotations

import re
import sys

from berth.cli import main

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

SHELLS = ("bash", "zsh", "fish")
JOB_ARGS = ("job_id", "job_ids")  # positionals that name jobs
GPU_ARGS = ("gpus",)  # positionals that name GPUs
GPU_OPTIONS = ("--gpu-ids", "--only", "--devices", "--exclude", "--prefer")  # value: GPU ids


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


class Spec:
    """What one command (``queue``) or action (``admin limits``) completes: its options
    (name, help, takes a value), what its positionals are (``jobs``, ``gpus``, ``files``,
    ``words``: :attr:`words`) and its actions (name, help)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.options: list[tuple[str, str, bool]] = []
        self.positionals = ""
        self.words: list[tuple[str, str]] = []
        self.actions: list[tuple[str, str]] = []


def specs() -> list[Spec]:
    """Every command of :data:`berth.cli.main.COMMANDS` (and each action under one), read
    from its parser; then `help` (commands and topics)."""
    out: list[Spec] = []
    for name in main.COMMANDS:
        _read(name, main._parser(name, main._load(name)), out)
    helps = Spec("help")
    helps.positionals = "words"
    helps.words = [(n, text) for n, (_, text) in main.COMMANDS.items()]
    helps.words += [(t, f"the {t} topic") for t in main.TOPICS]
    out.append(helps)
    return out


def _read(key: str, parser: argparse.ArgumentParser, out: list[Spec]) -> None:
    import argparse  # rare: the parsers' classes

    spec = Spec(key)
    out.append(spec)
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help or "" for c in a._choices_actions}
            for name, sub in a.choices.items():
                spec.actions.append((name, helps.get(name, "")))
                _read(f"{key} {name}", sub, out)
        elif a.option_strings:
            for opt in a.option_strings:
                spec.options.append((opt, _help(a.help), a.nargs != 0))
        elif a.dest in JOB_ARGS:
            spec.positionals = "jobs"
        elif a.dest in GPU_ARGS:
            spec.positionals = "gpus"
        elif not spec.positionals:
            spec.positionals = "files"


def _help(text: str | None) -> str:
    """An option's help as one short line (argparse's ``%(default)s`` and the like gone)."""
    text = re.sub(r"%\([a-z_]+\)s", "", text or "").replace("%%", "%")
    return " ".join(text.split())[:80]


def run(args: argparse.Namespace) -> int:
    write = {"bash": bash, "zsh": zsh, "fish": fish}[args.shell]
    sys.stdout.write(write(specs()))
    return 0


def _q(text: str) -> str:
    """``text`` in single quotes for bash and zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


def _case(spec: Spec) -> str:
    """The case pattern of a command or action in bash and zsh ("admin limits" quoted)."""
    return _q(spec.key) if " " in spec.key else spec.key


def _shared(specs: list[Spec], shell: str) -> str:
    """The part bash and zsh share: each command's options, value options, GPU options and
    positionals, set in a case on ``$cmd`` (``admin limits`` for an action)."""
    lines = []
    for s in specs:
        opts = " ".join(o for o, _, _ in s.options)
        vals = " ".join(o for o, _, v in s.options if v and o not in GPU_OPTIONS)
        gpus = " ".join(o for o, _, _ in s.options if o in GPU_OPTIONS)
        listed = " ".join(w for w, _ in [*s.actions, *s.words])
        kind = "actions" if s.actions else s.positionals
        lines.append(f"        {_case(s)}) opts={_q(opts)}; vals={_q(vals)}; gpuvals={_q(gpus)};"
                     f" kind={kind or 'none'}; listed={_q(listed)};;")  # fmt: skip
    return "\n".join(lines)


def bash(specs: list[Spec]) -> str:
    commands = " ".join([*main.COMMANDS, "help"])
    with_actions = "|".join(s.key for s in specs if s.actions)
    return f"""# berth's completion for bash: `source <(berth completion bash)` (berth help completion)
_berth_ids() {{
    berth __complete "$1" 2>/dev/null | cut -f1
}}
_berth() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} cmd=${{COMP_WORDS[1]}}
    local opts vals gpuvals kind listed
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "{commands} --help --version" -- "$cur"))
        return
    fi
    case $cmd in
        {with_actions or "''"}) [[ $COMP_CWORD -gt 2 ]] && cmd="$cmd ${{COMP_WORDS[2]}}";;
    esac
    case $cmd in
{_shared(specs, "bash")}
        *) return;;
    esac
    if [[ -n $gpuvals && " $gpuvals " == *" $prev "* ]]; then
        COMPREPLY=($(compgen -W "$(_berth_ids gpus)" -- "$cur"))
    elif [[ -n $vals && " $vals " == *" $prev "* ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ $kind == jobs || $kind == gpus ]]; then
        COMPREPLY=($(compgen -W "$(_berth_ids $kind)" -- "$cur"))
    elif [[ $kind == actions || $kind == words ]]; then
        COMPREPLY=($(compgen -W "$listed" -- "$cur"))
    elif [[ $kind == files ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o bashdefault -F _berth berth
"""


def zsh(specs: list[Spec]) -> str:
    commands = " ".join(_q(f"{n}:{t}") for n, (_, t) in main.COMMANDS.items())
    with_actions = "|".join(s.key for s in specs if s.actions)
    described = []
    for s in specs:  # the options' and words' helps, for _describe
        options = " ".join(_q(f"{o}:{h}") for o, h, _ in s.options)
        listed = " ".join(_q(f"{w.replace(':', chr(92) + ':')}:{h}") for w, h in [*s.actions, *s.words])
        described.append(f"        {_case(s)}) optd=({options}); wordd=({listed});;")
    return f"""#compdef berth
# berth's completion for zsh: `source <(berth completion zsh)` after compinit, or this file
# as _berth in a directory of $fpath (berth help completion)
_berth() {{
    local cmd=${{words[2]}} cur=${{words[CURRENT]}} prev=${{words[CURRENT-1]}}
    local opts vals gpuvals kind listed
    local -a described optd wordd ids
    if (( CURRENT == 2 )); then
        described=({commands} 'help:a command'"'"'s options and examples, or a topic')
        _describe -t commands 'berth command' described
        return
    fi
    case $cmd in
        {with_actions or "''"}) (( CURRENT > 3 )) && cmd="$cmd ${{words[3]}}";;
    esac
    case $cmd in
{_shared(specs, "zsh")}
        *) return 1;;
    esac
    case $cmd in
{chr(10).join(described)}
    esac
    if [[ -n $gpuvals && " $gpuvals " == *" $prev "* ]]; then
        kind=gpus
    elif [[ -n $vals && " $vals " == *" $prev "* ]]; then
        _files
        return
    elif [[ $cur == -* ]]; then
        _describe -t options 'option' optd
        return
    fi
    if [[ $kind == jobs || $kind == gpus ]]; then
        ids=(${{(f)"$(berth __complete $kind 2>/dev/null)"}})
        ids=(${{ids/$'\\t'/:}})
        _describe -t $kind ${{kind%s}} ids
    elif [[ $kind == actions || $kind == words ]]; then
        _describe -t words 'word' wordd
    elif [[ $kind == files ]]; then
        _files
    fi
}}
compdef _berth berth
"""


def _fq(text: str) -> str:
    """``text`` in single quotes for fish."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(specs: list[Spec]) -> str:
    out = [
        "# berth's completion for fish: berth completion fish > ~/.config/fish/completions/berth.fish",
        "complete -c berth -f",
    ]
    for n, (_, text) in main.COMMANDS.items():
        out.append(f"complete -c berth -n __fish_use_subcommand -a {n} -d {_fq(text)}")
    out.append("complete -c berth -n __fish_use_subcommand -a help -d 'a command or a topic'")
    actions = {s.key: [a for a, _ in s.actions] for s in specs if s.actions}
    for s in specs:
        words = s.key.split()
        cond = f"__fish_seen_subcommand_from {words[0]}"
        if len(words) > 1:
            cond += f"; and __fish_seen_subcommand_from {words[1]}"
        elif s.key in actions:
            cond += f"; and not __fish_seen_subcommand_from {' '.join(actions[s.key])}"
        head = f"complete -c berth -n {_fq(cond)}"
        for opt, text, value in s.options:
            flag = f"-l {opt[2:]}" if opt.startswith("--") else (
                f"-s {opt[1:]}" if len(opt) == 2 else f"-o {opt[1:]}")  # fmt: skip
            if opt in GPU_OPTIONS:
                out.append(f"{head} {flag} -x -a '(berth __complete gpus 2>/dev/null)' -d {_fq(text)}")
            else:
                out.append(f"{head} {flag}{' -r' if value else ''} -d {_fq(text)}")
        for w, text in [*s.actions, *s.words]:
            out.append(f"{head} -a {_fq(w)} -d {_fq(text)}")
        if s.positionals in ("jobs", "gpus"):
            out.append(f"{head} -a '(berth __complete {s.positionals} 2>/dev/null)'")
        elif s.positionals == "files":
            out.append(f"{head} -F")
    return "\n".join(out) + "\n"
