#!/usr/bin/python3
"""Doc tests: every YAML and shell example of one markdown page runs as it stands.

    run_doc_examples.py --millrace BIN [--churn-gen BIN] [--root DIR] [--keep] [-k] PAGE.md

tests/CMakeLists.txt registers one ctest entry per page of README.md and
docs/*.md (doc.README, doc.spec, doc.bundle, ...); tests/e2e/test_doc_harness.sh
tests this script on the pages of tests/doc/fixtures.

HOW A PAGE RUNS

Its fenced code blocks run in page order in one fresh scratch workspace
(under $TMPDIR, removed at the end), with `millrace`, `churn_gen` and `awk` (Debian's mawk) on PATH
(and the Python package built next to the binary, BUILD/python, on PYTHONPATH)
(the built binaries), HOME and TMPDIR inside the scratch directory and
NO_COLOR=1. By the block's info string:

  yaml, yml          a file. A whole millrace.yaml (first line `# millrace.yaml`)
                     is written to the workspace and checked: `millrace dag` and
                     `millrace status` on a copy must exit 0. Other YAML needs an
                     annotation (file=, fragment, output or ignore).
  sh, bash, shell    a script: `bash -e` in the workspace, in a process group of
                     its own that is killed when the script ends; it must exit 0.
  console            as sh, running the `$ ` lines (a line ending in a backslash
                     continues on the next, `> ` stripped); other lines are
                     output and not compared.
  anything else      (text, json, c, ...) not run. A block of output is `text`.
                     A fence without an info string is an error, so no example
                     hides from this test.

ANNOTATIONS

An HTML comment on the line (or lines) right before a fence says what the
block needs; a reader of the rendered page never sees it. Several keys may
share one comment: `<!-- doctest: setup=init file=millrace.yaml of=stages -->`.

  setup=NAME[,NAME]  prepare the workspace first (each NAME once per page):
                       init       `millrace init`: its millrace.yaml, data/customers.csv
                       churn      `churn_gen --users 2000 --events-per-user 20
                                  --seed 7 --out data`: data/users.csv, data/events.csv
                       docs/X.md  that page's examples, run here first (their
                                  output is shown only if one fails)
  file=PATH          write the block to PATH in the workspace instead of running
                     it (a millrace.yaml is checked as above)
  fragment of=K.P    a YAML fragment, checked, never skipped: spliced into a copy
                     of the workspace's millrace.yaml at the dotted key path K.P
                     (`.` is the top); `millrace dag` and `millrace status` on
                     the copy must exit 0. A mapping is merged key by key into
                     the mapping there (each of its keys replaces that key), any
                     other value replaces the value; the block may repeat the
                     path on top (`stages:` over its stages, with of=stages).
  file=PATH of=K.P   the same splice into the workspace's YAML file PATH itself,
                     kept for the blocks after it
  expect-exit=N      the block (or the check of its millrace.yaml or fragment)
                     exits N: an example of an error
  background port=N  a server: started, waited for until 127.0.0.1:PORT accepts,
                     the next runnable block runs against it, then it is stopped
                     by pid (SIGTERM to its process group, SIGKILL after 10 s).
                     PORT is a free port picked here, and N (as a whole number)
                     is replaced by it in both blocks, so a page can say 8080
                     and the suite never collides with anything on 8080.
  output             on a block of output (text, yaml, ...) right after a block
                     that ran: its lines appear in what that block printed, in
                     order (other lines may come between); `...` in a line
                     matches any text, blanks match any run of blanks, and 32
                     hex digits (an xxh3-128 id) match any 32 hex digits.
  timeout=S          the block's time limit (default 120 s; 30 s for a
                     background block to listen)
  ignore reason=".." not run, only where running is impossible here; the reason
                     is printed in the test output

Every block prints `ok N - PAGE:LINE ...`; a failure prints `not ok`, the
fence's PAGE:LINE, what was expected, and the command's output, and stops the
page (later blocks build on earlier ones; -k runs them anyway). Nothing here
touches the network: servers listen on 127.0.0.1 and proxies are unset.
"""
import argparse
import difflib
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

import yaml

RUN_LANGS = {"yaml": "yaml", "yml": "yaml", "sh": "sh", "bash": "sh", "shell": "sh", "console": "console"}
KEYS = {"setup", "file", "fragment", "of", "expect-exit", "background", "port", "output", "timeout",
        "ignore", "reason"}
SETUPS = ("init", "churn")
DEFAULT_TIMEOUT = 120
SANITIZER = re.compile(r"(ERROR|WARNING): (Address|Leak|Thread|Memory)Sanitizer|runtime error:|"
                       r"SUMMARY: (Address|Undefined|Leak|Thread)")
HASH = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")  # an xxh3-128 id: any one matches
FENCE = re.compile(r"^( *)(`{3,}|~{3,})(.*)$")
ANNOT = re.compile(r"^\s*<!--\s*doctest:(.*?)-->\s*$")


class DocError(Exception):
    """A mistake in the markdown itself (reported as FILE:LINE: message)."""


class Block:
    def __init__(self, doc, line, info, body, annot):
        self.doc, self.line, self.info, self.body, self.annot = doc, line, info, body, annot
        self.lang = info.split()[0] if info.split() else ""
        self.kind = RUN_LANGS.get(self.lang)

    @property
    def where(self):
        return "%s:%d" % (self.doc, self.line)


def parse_annotation(text, where):
    try:
        tokens = shlex.split(text)
    except ValueError as e:
        raise DocError("%s: bad doctest annotation: %s" % (where, e))
    out = {}
    for tok in tokens:
        key, eq, val = tok.partition("=")
        if key not in KEYS:
            close = difflib.get_close_matches(key, sorted(KEYS), 1)
            raise DocError("%s: unknown doctest annotation '%s'%s" % (
                where, key, " (did you mean '%s'?)" % close[0] if close else ""))
        out[key] = val if eq else True
    return out


def parse_markdown(path, name):
    """Returns the fenced blocks of a markdown file, annotations attached."""
    blocks, pending, pending_line, errors = [], {}, 0, []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = ANNOT.match(line)
        if m:
            ann = parse_annotation(m.group(1), "%s:%d" % (name, i + 1))
            pending.update(ann)
            pending_line = pending_line or i + 1
            i += 1
            continue
        m = FENCE.match(line)
        if not m:
            if line.strip() and pending:
                raise DocError("%s:%d: a doctest annotation must come right before a fence" % (name, pending_line))
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        if fence[0] == "`" and "`" in info:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        close = re.compile(r"^ *%s%s* *$" % (re.escape(fence[0]) * len(fence), re.escape(fence[0])))
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i].lstrip())
            i += 1
        if i == len(lines):
            raise DocError("%s:%d: the code block is never closed" % (name, start))
        i += 1
        b = Block(name, start, info, "\n".join(body) + "\n", pending)
        if not b.lang:
            errors.append("%s:%d: a fence without an info string: say what the block is "
                          "(yaml, sh, text for output, ...)" % (name, start))
        blocks.append(b)
        pending, pending_line = {}, 0
    if pending:
        errors.append("%s:%d: a doctest annotation with no code block after it" % (name, pending_line))
    if errors:
        raise DocError("\nnot ok - ".join(errors))
    return blocks


def check_annotations(b):
    a = b.annot
    if "fragment" in a and "of" not in a:
        raise DocError("%s: `fragment` needs of=KEY.PATH (where it goes in millrace.yaml)" % b.where)
    if "of" in a and "fragment" not in a and "file" not in a:
        raise DocError("%s: of=KEY.PATH goes with `fragment` or file=PATH" % b.where)
    if "of" in a and b.kind != "yaml":
        raise DocError("%s: only a YAML block goes into a YAML file at of=KEY.PATH" % b.where)
    if ("port" in a) != ("background" in a):
        raise DocError("%s: `background` and `port=N` go together" % b.where)
    if "ignore" in a and not a.get("reason"):
        raise DocError('%s: `ignore` needs reason="why this cannot run here"' % b.where)
    for key in ("expect-exit", "port", "timeout"):
        if key in a and not re.fullmatch(r"\d+", str(a[key])):
            raise DocError("%s: %s=%s: expected a whole number" % (b.where, key, a[key]))
    if "output" in a:
        if b.kind in ("sh", "console") or len(a) > 1:
            raise DocError("%s: `output` stands alone, on a block of output (text, yaml, json) after the "
                           "block that prints it" % b.where)
        return
    if b.kind is None:
        if a:
            raise DocError("%s: a '%s' block is not run, so '%s' means nothing here" % (
                b.where, b.lang, sorted(a)[0]))
        return
    if b.kind == "yaml" and "background" in a:
        raise DocError("%s: only a shell block can run in the background" % b.where)
    if "fragment" in a and b.kind != "yaml":
        raise DocError("%s: only a YAML block can be a fragment" % b.where)
    if "fragment" in a and "file" in a:
        raise DocError("%s: a block is a fragment or a file, not both" % b.where)
    if "file" in a:
        f = str(a["file"])
        if not f or f.startswith("/") or ".." in f.split("/"):
            raise DocError("%s: file=%s: a path inside the workspace" % (b.where, f))


# --- YAML round trip that keeps every scalar as written --------------------

class Scalar(str):
    """A YAML scalar as text, with its style (plain, quoted, literal)."""
    style = None


class KeepLoader(yaml.SafeLoader):
    pass


class KeepDumper(yaml.SafeDumper):
    pass


# No implicit types: `on`, `0.10`, `2024-03-01` stay the text millrace reads.
KeepLoader.yaml_implicit_resolvers = {}
KeepDumper.yaml_implicit_resolvers = {}


def _construct_scalar(loader, node):
    s = Scalar(loader.construct_scalar(node))
    s.style = node.style
    return s


def _represent_scalar(dumper, data):
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style=data.style)


KeepLoader.add_constructor("tag:yaml.org,2002:str", _construct_scalar)
KeepDumper.add_representer(Scalar, _represent_scalar)


def splice(base, path, fragment):
    """Puts fragment at the dotted path of base (a mapping merged key by key)."""
    keys = [k for k in path.split(".") if k] if path != "." else []
    inner = fragment  # a fragment may repeat the path: `stages:` over its stages, with of=stages
    for k in keys:
        if not (isinstance(inner, dict) and len(inner) == 1 and k in inner):
            break
        inner = inner[k]
    else:
        fragment = inner
    node = base
    for k in keys[:-1]:
        if not isinstance(node, dict):
            raise ValueError("'%s' is not a mapping in the workspace's millrace.yaml" % k)
        if k not in node or not isinstance(node[k], dict):
            node[k] = {}
        node = node[k]
    if not keys:
        if not isinstance(fragment, dict):
            raise ValueError("a fragment of the top level must be a mapping")
        base.update(fragment)
        return base
    last = keys[-1]
    if not isinstance(node, dict):
        raise ValueError("the parent of '%s' is not a mapping" % last)
    if isinstance(fragment, dict) and isinstance(node.get(last), dict):
        node[last].update(fragment)
    else:
        node[last] = fragment
    return base


# --- running ---------------------------------------------------------------

class Failure(Exception):
    def __init__(self, message, output=""):
        super().__init__(message)
        self.output = output


class Runner:
    def __init__(self, args, root_dir):
        self.args = args
        self.src = os.path.abspath(args.root)
        self.root = root_dir
        self.ws = os.path.join(root_dir, "ws")
        self.n_checks = 0
        self.n_skipped = 0
        self.done_setups = set()
        self.last_output = None
        self.quiet = None
        bindir = os.path.join(root_dir, "bin")
        for d in (self.ws, bindir, os.path.join(root_dir, "home"), os.path.join(root_dir, "tmp"),
                  os.path.join(root_dir, "blocks")):
            os.makedirs(d, exist_ok=True)
        os.symlink(os.path.abspath(args.millrace), os.path.join(bindir, "millrace"))
        if args.churn_gen:
            os.symlink(os.path.abspath(args.churn_gen), os.path.join(bindir, "churn_gen"))
        # The pages generate their example data with awk's rand(), as Debian's
        # default awk (mawk) draws it; gawk, which mariadb-server (the Slurm
        # cluster's accounting) pulls in, takes over `awk` and draws other numbers.
        if os.path.exists("/usr/bin/mawk"):
            os.symlink("/usr/bin/mawk", os.path.join(bindir, "awk"))
        self.env = dict(os.environ)
        self.env.update(PATH=bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
                        HOME=os.path.join(root_dir, "home"), TMPDIR=os.path.join(root_dir, "tmp"),
                        NO_COLOR="1")
        # the Python package built next to the binary (build/python), as `make install-python` would
        pkg = os.path.join(os.path.dirname(os.path.abspath(args.millrace)), "python")
        if os.path.isdir(os.path.join(pkg, "millrace")):
            self.env["PYTHONPATH"] = pkg + (os.pathsep + self.env["PYTHONPATH"] if self.env.get("PYTHONPATH") else "")
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            self.env.pop(k, None)
        self.env["no_proxy"] = self.env["NO_PROXY"] = "127.0.0.1,localhost"

    def ok(self, text):
        if self.quiet is not None:  # inside a setup=docs/X.md: shown only if it fails
            self.quiet.append("ok - " + text)
            return
        self.n_checks += 1
        print("ok %d - %s" % (self.n_checks, text), flush=True)

    # A command in its own process group; the group is killed when it ends.
    def spawn(self, argv, cwd, out_path):
        out = open(out_path, "wb")
        try:
            return subprocess.Popen(argv, cwd=cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            out.close()

    @staticmethod
    def stop_group(proc, grace):
        """SIGTERM to the process group, SIGKILL after grace seconds; returns the leader's status."""
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            rc = proc.wait(grace)
        except subprocess.TimeoutExpired:
            rc = None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return proc.wait() if rc is None else rc

    def run_argv(self, argv, cwd, tag, timeout):
        out_path = os.path.join(self.root, "blocks", tag + ".out")
        proc = self.spawn(argv, cwd, out_path)
        timed_out = False
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = self.stop_group(proc, 5)
        try:  # whatever the command left running
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        with open(out_path, encoding="utf-8", errors="replace") as f:
            output = f.read()
        if timed_out:
            raise Failure("still running after %d s (a `timeout=S` annotation gives it longer)" % timeout, output)
        if SANITIZER.search(output):
            raise Failure("a sanitizer report", output)
        return rc, output

    def script_for(self, b, body):
        if b.kind == "console":
            cmds, cont = [], False
            for line in body.split("\n"):
                if cont:
                    cmds.append(line[2:] if line.startswith("> ") else line)
                elif line.startswith("$ "):
                    cmds.append(line[2:])
                else:
                    continue
                cont = line.endswith("\\")
            body = "\n".join(cmds) + "\n"
        path = os.path.join(self.root, "blocks", "%04d.sh" % b.line)
        with open(path, "w", encoding="utf-8") as f:
            f.write(body)
        return path

    def setup(self, name, b, depth):
        if name in self.done_setups:
            return
        self.done_setups.add(name)
        if name == "init":
            rc, out = self.run_argv(["millrace", "init"], self.ws, "setup-init", DEFAULT_TIMEOUT)
            if rc != 0:
                raise Failure("setup=init: `millrace init` exited %d" % rc, out)
        elif name == "churn":
            if not self.args.churn_gen:
                raise Failure("setup=churn needs --churn-gen (the churn_gen binary)")
            argv = ["churn_gen", "--users", "2000", "--events-per-user", "20", "--seed", "7", "--out", "data"]
            rc, out = self.run_argv(argv, self.ws, "setup-churn", DEFAULT_TIMEOUT)
            if rc != 0:
                raise Failure("setup=churn: `%s` exited %d" % (" ".join(argv), rc), out)
        elif name.endswith(".md"):
            path = os.path.join(self.src, name)
            if not os.path.isfile(path) or ".." in name.split("/"):
                raise DocError("%s: setup=%s: no such file in the repository" % (b.where, name))
            if depth > 4:
                raise DocError("%s: setup=%s: setups nested too deep (a cycle?)" % (b.where, name))
            subs = parse_markdown(path, name)
            outer, self.quiet = self.quiet, []
            try:
                i = 0
                while i < len(subs):
                    try:
                        i += 1 + self.run_block(subs[i], subs[i + 1:], depth + 1)
                    except Failure as e:
                        raise Failure("setup=%s: %s: %s" % (name, subs[i].where, e),
                                      "\n".join(self.quiet) + "\n" + e.output)
            finally:
                self.quiet = outer
        else:
            close = difflib.get_close_matches(name, SETUPS, 1)
            raise DocError("%s: unknown setup '%s' (known: %s, or a docs/FILE.md)%s" % (
                b.where, name, ", ".join(SETUPS), " (did you mean '%s'?)" % close[0] if close else ""))

    def check_spec(self, spec_text, b, what):
        """millrace dag and status on a copy of the spec; both must exit expect-exit."""
        want = int(b.annot.get("expect-exit", 0))
        d = os.path.join(self.root, "checks", "%04d" % b.line)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "millrace.yaml"), "w", encoding="utf-8") as f:
            f.write(spec_text)
        for verb in ("dag", "status"):
            rc, out = self.run_argv(["millrace", "-C", d, verb], d, "%04d-%s" % (b.line, verb), DEFAULT_TIMEOUT)
            if rc != want:
                numbered = "".join("%4d  %s\n" % (i + 1, l) for i, l in enumerate(spec_text.split("\n")))
                raise Failure("%s: `millrace %s` exited %d, expected %d" % (what, verb, rc, want),
                              out + "\n--- the millrace.yaml checked ---\n" + numbered)
            self.last_output = out

    def spliced(self, b, base_name):
        """The YAML file base_name of the workspace with the block spliced in at of=."""
        a = b.annot
        base_path = os.path.join(self.ws, base_name)
        if not os.path.isfile(base_path):
            raise DocError("%s: of=%s goes into the workspace's %s, and there is none yet: "
                           "write one with an earlier block or add setup=init" % (b.where, a["of"], base_name))
        try:
            base = yaml.load(open(base_path, encoding="utf-8"), Loader=KeepLoader) or {}
        except yaml.YAMLError as e:
            raise Failure("the workspace's %s is not valid YAML: %s" % (base_name, e))
        try:
            frag = yaml.load(b.body, Loader=KeepLoader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = "%s:%d:%d: " % (b.doc, b.line + 1 + mark.line, mark.column + 1) if mark else ""
            raise Failure("%snot valid YAML: %s" % (at, getattr(e, "problem", None) or e))
        try:
            spec = splice(base, str(a["of"]), frag)
        except ValueError as e:
            raise DocError("%s: of=%s: %s" % (b.where, a["of"], e))
        return yaml.dump(spec, Dumper=KeepDumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=1000)

    def run_yaml(self, b):
        a = b.annot
        if "fragment" in a:
            text = self.spliced(b, "millrace.yaml")
            self.check_spec(text, b, "the fragment in the workspace's millrace.yaml at '%s'" % a["of"])
            return "fragment of %s: accepted" % a["of"] if "expect-exit" not in a else \
                "fragment of %s: rejected with exit %s" % (a["of"], a["expect-exit"])
        target = a.get("file")
        if target is None:
            first = b.body.split("\n", 1)[0].strip()
            if first == "# millrace.yaml":
                target = "millrace.yaml"
            else:
                raise DocError("%s: a YAML block that is not a whole millrace.yaml (first line "
                               "`# millrace.yaml`) needs an annotation: file=PATH, fragment of=KEY.PATH "
                               "or ignore reason=\"...\"" % b.where)
        return self.write_file(b, str(target))

    def write_file(self, b, target):
        path = os.path.join(self.ws, target)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path):
            os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
        text = self.spliced(b, target) if "of" in b.annot else b.body
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        if b.kind == "sh":
            os.chmod(path, 0o755)
        how = "%s at %s" % (target, b.annot["of"]) if "of" in b.annot else target
        if os.path.basename(target) == "millrace.yaml":
            self.check_spec(text, b, "%s as written" % how)
            return "%s written and accepted" % how if "expect-exit" not in b.annot else \
                "%s written, rejected with exit %s" % (how, b.annot["expect-exit"])
        return "%s written" % how

    def run_sh(self, b, body):
        want = int(b.annot.get("expect-exit", 0))
        timeout = int(b.annot.get("timeout", DEFAULT_TIMEOUT))
        script = self.script_for(b, body)
        rc, out = self.run_argv(["bash", "-e", script], self.ws, "%04d" % b.line, timeout)
        self.last_output = out
        if rc != want:
            raise Failure("the %s block exited %d, expected %d" % (b.lang, rc, want), out)
        return "%s block exits %d" % (b.lang, rc)

    def run_background(self, b, client):
        doc_port = str(b.annot["port"])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
        sub = re.compile(r"(?<![0-9])%s(?![0-9])" % doc_port)
        script = self.script_for(b, sub.sub(port, b.body))
        out_path = os.path.join(self.root, "blocks", "%04d.out" % b.line)
        proc = self.spawn(["bash", "-e", script], self.ws, out_path)
        try:
            deadline = time.monotonic() + int(b.annot.get("timeout", 30))
            while True:
                if proc.poll() is not None:
                    raise Failure("the server exited %d before it listened on port %s (%s in the doc)" % (
                        proc.returncode, port, doc_port), open(out_path, errors="replace").read())
                with socket.socket() as s:
                    s.settimeout(0.5)
                    if s.connect_ex(("127.0.0.1", int(port))) == 0:
                        break
                if time.monotonic() > deadline:
                    raise Failure("nothing listens on 127.0.0.1:%s (%s in the doc) after %s s" % (
                        port, doc_port, b.annot.get("timeout", 30)), open(out_path, errors="replace").read())
                time.sleep(0.05)
            self.ok("%s: %s block listens on 127.0.0.1:%s (port %s in the doc)" % (b.where, b.lang, port, doc_port))
            try:
                msg = self.run_sh(client, sub.sub(port, client.body))
            except Failure as e:
                raise Failure(str(e), e.output + "\n--- the server's output ---\n" +
                              open(out_path, errors="replace").read())
            self.ok("%s: %s (against the server of %s)" % (client.where, msg, b.where))
        finally:
            rc = self.stop_group(proc, 10)
        server_out = open(out_path, errors="replace").read()
        if SANITIZER.search(server_out):
            raise Failure("a sanitizer report from the server", server_out)
        return "the server of %s stopped by pid %d (status %d)" % (b.where, proc.pid, rc)

    def run_block(self, b, following, depth=0):
        """Runs one block; returns the number of following blocks it consumed."""
        check_annotations(b)
        a = b.annot
        if "ignore" in a:
            if b.kind is None:
                raise DocError("%s: a '%s' block is never run; `ignore` is for yaml and shell" % (b.where, b.lang))
            if self.quiet is None:
                self.n_skipped += 1
            self.ok("%s: %s block # SKIP %s" % (b.where, b.lang, a["reason"]))
            return 0
        for name in str(a.get("setup", "")).split(",") if "setup" in a else []:
            self.setup(name.strip(), b, depth)
        report = self.ok
        if "output" in a:
            self.check_output(b)
            report("%s: the output shown is what the block before printed" % b.where)
            return 0
        if b.kind is None:
            return 0
        if "file" in a and b.kind != "yaml":
            report("%s: %s" % (b.where, self.write_file(b, str(a["file"]))))
            return 0
        if b.kind == "yaml":
            report("%s: %s" % (b.where, self.run_yaml(b)))
            return 0
        if "background" in a:
            client = following[0] if following else None
            if client is None or client.kind not in ("sh", "console") or "background" in client.annot \
                    or "file" in client.annot or "ignore" in client.annot:
                raise DocError("%s: a background block needs a shell block after it that runs against it" % b.where)
            check_annotations(client)
            for name in str(client.annot.get("setup", "")).split(",") if "setup" in client.annot else []:
                self.setup(name.strip(), client, depth)
            report(self.run_background(b, client))
            return 1
        report("%s: %s" % (b.where, self.run_sh(b, b.body)))
        return 0

    def check_output(self, b):
        if self.last_output is None:
            raise DocError("%s: an `output` block needs a block before it that ran" % b.where)
        squash = lambda l: " ".join(l.split())  # column widths are not the point
        got = [squash(l) for l in self.last_output.split("\n")]
        want = [squash(l) for l in b.body.rstrip("\n").split("\n")]
        j = 0
        for w in want:
            pat = ".*".join(re.escape(p) for p in w.split("..."))
            pat = re.compile("^" + HASH.sub("[0-9a-f]{32}", pat) + "$")
            while j < len(got) and not pat.match(got[j]):
                j += 1
            if j == len(got):
                raise Failure("the output shown does not match: no line '%s' (in this order)" % w,
                              self.last_output)
            j += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--millrace", required=True, help="the built millrace binary")
    ap.add_argument("--churn-gen", help="the built churn_gen binary (setup=churn)")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."),
                    help="the repository root (docs are named relative to it)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("-k", "--keep-going", action="store_true", help="run the later blocks after a failure")
    ap.add_argument("doc", help="the markdown file (relative to --root, or absolute)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    path = args.doc if os.path.isabs(args.doc) else os.path.join(root, args.doc)
    name = os.path.relpath(path, root)
    try:
        blocks = parse_markdown(path, name)
    except (DocError, OSError) as e:
        print("not ok - %s" % e)
        return 1
    bad = []  # every misused annotation of the page at once, before anything runs
    for b in blocks:
        try:
            check_annotations(b)
        except DocError as e:
            bad.append(str(e))
    if bad:
        print("\n".join("not ok - " + e for e in bad))
        return 1
    tmp = tempfile.mkdtemp(prefix="millrace-doc.%s." % os.path.basename(name).replace(".md", ""))
    runner = Runner(args, tmp)
    failed = 0
    try:
        i = 0
        while i < len(blocks):
            b = blocks[i]
            try:
                i += 1 + runner.run_block(b, blocks[i + 1:])
            except DocError as e:
                runner.n_checks += 1
                print("not ok %d - %s" % (runner.n_checks, e))
                failed += 1
                i += 1
            except Failure as e:
                runner.n_checks += 1
                print("not ok %d - %s: %s" % (runner.n_checks, b.where, e))
                if e.output:
                    print("  --- output ---")
                    lines = e.output.rstrip("\n").split("\n")
                    if len(lines) > 120:
                        lines = ["[... %d lines before ...]" % (len(lines) - 120)] + lines[-120:]
                    print("\n".join("  | " + l for l in lines))
                failed += 1
                i += 1
            if failed and not args.keep_going:
                rest = sum(1 for x in blocks[i:] if x.kind)
                if rest:
                    print("# %d later runnable blocks of %s not run (they build on this one; -k runs them)"
                          % (rest, name))
                break
    finally:
        if args.keep:
            print("# scratch directory kept: %s" % tmp)
        else:
            for d, dirs, _ in os.walk(tmp):
                for x in dirs:
                    p = os.path.join(d, x)
                    if not os.path.islink(p):
                        os.chmod(p, 0o755)
            shutil.rmtree(tmp, ignore_errors=True)
    n_run = sum(1 for b in blocks if b.kind)
    if failed:
        print("FAIL %s: %d failed" % (name, failed))
        return 1
    print("PASS %s: %d runnable blocks, %d checks, %d ignored" % (name, n_run, runner.n_checks, runner.n_skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
