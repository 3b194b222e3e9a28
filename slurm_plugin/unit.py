"""The systemd unit of the decision service as systemd reads it: command-line quoting (systemd.syntax and
systemd.service "Command lines"), the unit file's sections, and which paths the unit's sandbox hides.

systemd reads an ``ExecStart=`` line in three steps, and a word must survive all three:

1. specifiers: ``%x`` is replaced on the whole line (``%%`` is one ``%``);
2. words: split at whitespace; ``"..."`` and ``'...'`` quote, C escapes (``\\\\``, ``\\"``, ``\\t``) are
   undone, inside quotes and out;
3. environment: in the arguments (not in the command's path), ``$NAME`` and ``${NAME}`` are replaced at
   start (``$$`` is one ``$``).

:func:`exec_word` writes a word so that the three steps give it back; :func:`exec_words` undoes them
(for ``hook check``), refusing what it cannot read without the service's environment.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

# systemd's fixed search path for a command without a slash (and the PATH the service starts with)
SYSTEMD_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# the folders each sandbox setting hides from the service (systemd.exec)
HIDDEN_BY = {"ProtectHome": ("/home", "/root", "/run/user"), "PrivateTmp": ("/tmp", "/var/tmp")}
# systemd runs no command whose path holds these ("Executable name contains special characters")
UNSAFE_IN_COMMAND = "\"'\\"
_SAFE_WORD = re.compile(r"[A-Za-z0-9_/.,:+=@-]+")
_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
              '"': '"', "'": "'", "s": " "}


def exec_word(word: str, command: bool = False) -> str:
    """One argument of an ``ExecStart=`` line, quoted so that systemd reads back exactly ``word``
    (``command``: the first word, the command's path, in which systemd replaces no ``$``).

    >>> exec_word("/opt/gs/bin/greenslurm")
    '/opt/gs/bin/greenslurm'
    >>> print(exec_word('/etc/cfg dir/100% "x" $HOME\\\\a'))
    "/etc/cfg dir/100%% \\"x\\" $$HOME\\\\a"
    """
    if not word:
        raise ValueError("an empty word")
    if any(ord(c) < 32 or ord(c) == 127 for c in word):
        raise ValueError(f"{word!r} holds a control character (newline, tab, ...)")
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{word!r} is not valid UTF-8") from None
    if _SAFE_WORD.fullmatch(word):
        return word
    escaped = word.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("%", "%%")
    return '"' + (escaped if command else escaped.replace("$", "$$")) + '"'


def exec_line(argv: tuple[str, ...] | list[str]) -> str:
    """An ``ExecStart=`` value for ``argv``; the command itself must be an absolute path.

    >>> exec_line(["/usr/bin/env", "greenslurm", "hook", "serve", "--config", "/etc/my cfg/hook.toml"])
    '/usr/bin/env greenslurm hook serve --config "/etc/my cfg/hook.toml"'
    """
    if not argv or not argv[0].startswith("/"):
        raise ValueError(f"the command {argv[0] if argv else ''!r} is not an absolute path")
    if any(c in UNSAFE_IN_COMMAND for c in argv[0]):
        raise ValueError(f"systemd refuses a command path holding a quote or backslash ({argv[0]!r}): "
                         "give a symlink without them")
    return " ".join(exec_word(word, command=(k == 0)) for k, word in enumerate(argv))


def exec_words(value: str) -> list[str]:
    """The argv systemd runs for an ``ExecStart=`` value (specifiers other than ``%%``, environment
    variables and a command prefix such as ``-`` or ``@`` are ValueErrors: ``hook check`` cannot read them).

    >>> exec_words('/opt/x/bin/greenslurm hook serve --config "/etc/cfg dir/100%% \\\\"q\\\\" $$HOME"')
    ['/opt/x/bin/greenslurm', 'hook', 'serve', '--config', '/etc/cfg dir/100% "q" $HOME']
    >>> exec_words("/bin/x %h")
    Traceback (most recent call last):
    ValueError: the specifier %h needs the unit's context
    """
    words: list[str] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quote, started = [], None, False
        while i < n and (quote or value[i] not in " \t"):
            c = value[i]
            if c == "%":
                if value[i + 1:i + 2] != "%":
                    raise ValueError(f"the specifier %{value[i + 1:i + 2]} needs the unit's context")
                word.append(("%",))
                i += 2
                continue
            if c in "\"'" and (quote is None or quote == c):
                quote = None if quote else c
                started = True
            elif c == "\\":
                escape = value[i + 1:i + 2]
                if escape not in _C_ESCAPES:
                    raise ValueError(f"the escape \\{escape} is not one this check reads")
                word.append(_C_ESCAPES[escape])
                i += 1
            elif c == "$" and words:                     # the command's path keeps its $ as written
                if value[i + 1:i + 2] != "$":
                    raise ValueError("an environment variable ($NAME) is replaced only when the service starts")
                word.append(("$",))
                i += 1
            else:
                word.append(c)
            i += 1
        if quote:
            raise ValueError(f"an unterminated {quote} quote")
        text = "".join(part[0] if isinstance(part, tuple) else part for part in word)
        if text or started:
            words.append(text)
    if words and words[0][:1] in ("-", "@", ":", "+", "!"):
        raise ValueError(f"the command prefix {words[0][0]!r} is not one the shipped unit uses")
    return words


def unit_settings(text: str) -> dict[tuple[str, str], list[str]]:
    """A unit file as {(section, key): [values]} (continuation lines joined; an empty value resets the
    list, as systemd does for ExecStart=); a line outside a section or without '=' is a ValueError naming it.

    >>> unit_settings("[Service]\\nExecStart=/bin/a \\\\\\n  b\\n")[("Service", "ExecStart")]
    ['/bin/a  b']
    """
    settings: dict[tuple[str, str], list[str]] = {}
    section = None
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip() if pending else raw.strip()
        if not pending and (not line or line.startswith(("#", ";"))):
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if re.fullmatch(r"\[[A-Za-z]+\]", line):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if section is None or not sep or not re.fullmatch(r"[A-Za-z]+", key):
            raise ValueError(f"line {number}: {raw.strip()!r} is not a [Section] or Key=value line")
        if value == "":
            settings[(section, key)] = []
        else:
            settings.setdefault((section, key), []).append(value)
    return settings


@dataclass(frozen=True)
class Sandbox:
    """The folders a unit's ProtectHome= and PrivateTmp= hide from its service."""

    hidden: tuple[tuple[str, str], ...]          # (folder, the setting that hides it)

    @classmethod
    def of(cls, settings: dict[tuple[str, str], list[str]]) -> "Sandbox":
        hidden = []
        protect_home = (settings.get(("Service", "ProtectHome")) or ["no"])[-1].lower()
        if protect_home in ("yes", "true", "on", "1", "tmpfs"):      # read-only leaves them readable
            hidden += [(folder, f"ProtectHome={protect_home}") for folder in HIDDEN_BY["ProtectHome"]]
        private_tmp = (settings.get(("Service", "PrivateTmp")) or ["no"])[-1].lower()
        if private_tmp in ("yes", "true", "on", "1"):
            hidden += [(folder, f"PrivateTmp={private_tmp}") for folder in HIDDEN_BY["PrivateTmp"]]
        return cls(tuple(hidden))

    def hides(self, path: str) -> str | None:
        """Why the service cannot see ``path`` (as written, or where its symlinks lead), or None.

        >>> Sandbox((("/home", "ProtectHome=yes"),)).hides("/home/ann/venv/bin/greenslurm")
        '/home/ann/venv/bin/greenslurm is under /home, which ProtectHome=yes hides from the service'
        >>> Sandbox((("/home", "ProtectHome=yes"),)).hides("/homework/x") is None
        True
        """
        for candidate in dict.fromkeys((path, os.path.realpath(path))):
            for folder, setting in self.hidden:
                if candidate == folder or candidate.startswith(folder + "/"):
                    shown = path if candidate == path else f"{path} (-> {candidate})"
                    return f"{shown} is under {folder}, which {setting} hides from the service"
        return None


def interpreter(path: str) -> str | None:
    """The interpreter named by a script's ``#!`` line (a virtual environment's python), or None."""
    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", "replace").split()
    return parts[0] if parts else None


def command_path(argv: list[str] | tuple[str, ...]) -> str | None:
    """The file systemd starts for ``argv``, or None when it is not there: argv[0], or for
    ``/usr/bin/env NAME`` the NAME found on the service's PATH."""
    if not argv:
        return None
    if os.path.basename(argv[0]) == "env" and len(argv) > 1 and "/" not in argv[1]:
        for folder in SYSTEMD_PATH:
            candidate = os.path.join(folder, argv[1])
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None
    return argv[0] if os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK) else None


def hidden_paths(argv: list[str] | tuple[str, ...], config_path: str | None, sandbox: Sandbox) -> list[str]:
    """Why each of the unit's files the service needs (the command, its interpreter, hook.toml) is hidden
    from it by the sandbox; empty when every one is visible."""
    paths = [argv[0]] if argv else []
    found = command_path(argv)
    if found and found not in paths:
        paths.append(found)
    script = interpreter(found) if found else None
    if script:
        paths.append(script)
    if config_path:
        paths.append(config_path)
    return [why for path in paths if (why := sandbox.hides(path))]
