"""Take docs/dashboard.png: the real dashboard under load, in headless Chromium.

    python tests/web/shoot.py [docs/dashboard.png] [--seconds 240]

Not a test (pytest does not collect it); needs root, Debian's chromium + chromium-driver and
selenium. It builds the fake NVML library, declares 8 fake A100s, starts a real daemon with
``--http``, and lets four users (created as system users if missing: alice, bob, chen, dana)
load it: alice, bob and chen submit about 45 jobs of 0.5 to 4 GPUs that run 20 s to several
minutes (some held), dana holds a GPU with a daemonless claim (``berth.api.lease``). Meanwhile
the fake GPUs' utilisation and memory follow who holds them (as real ones would under
training jobs). After ``--seconds`` the page is photographed at full height.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import pwd
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
USERS = ("alice", "bob", "chen", "dana")
HELD: list[Any] = []  # (dana's claim, in her child process)
NAMES = (
    "llama-7b-lora", "resnet50-imagenet", "bert-finetune", "sweep-lr-3e-4", "sweep-lr-1e-3",
    "vit-b16-pretrain", "whisper-eval", "diffusion-sample", "gnn-ogbn", "ppo-atari",
    "t5-distill", "clip-retrieval", "yolo-coco", "mae-pretrain", "asr-conformer",
)  # fmt: skip


def _load(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=os.path.join(REPO, "docs", "dashboard.png"))
    ap.add_argument("--seconds", type=float, default=240)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: it creates users and runs their jobs")
    users = _load("userkit", os.path.join(TESTS, "userkit.py"))
    for u in USERS:
        users.ensure_user(u)
    lib_dir = _load("fakenvml_build", os.path.join(TESTS, "fakenvml", "build.py")).build()
    ctypes.CDLL(os.path.join(lib_dir, "libnvidia-ml.so.1"), mode=ctypes.RTLD_GLOBAL)
    top = tempfile.mkdtemp(prefix="berth-shot-")
    os.chmod(top, 0o755)
    state = os.path.join(top, "nvml.json")
    procs = os.path.join(top, "nvml.procs")
    claims = os.path.join(top, "claims")
    for d in (procs, claims):
        os.mkdir(d)
        os.chmod(d, 0o1777)
    sock_dir = os.path.join(top, "sock")
    os.mkdir(sock_dir)
    os.chmod(sock_dir, 0o711)
    env = {
        **os.environ, "LD_LIBRARY_PATH": lib_dir, "FAKE_NVML_STATE": state,
        "FAKE_NVML_PROCS": procs, "BERTH_CONFIG": "", "BERTH_CLAIMS_DIR": claims,
        "BERTH_STATE_DIR": os.path.join(top, "state"),
        "BERTH_SOCKET": os.path.join(sock_dir, "d.sock"),
    }  # fmt: skip
    os.environ.update({k: v for k, v in env.items() if k != "LD_LIBRARY_PATH"})
    sys.path.insert(0, TESTS)
    from conftest import fake_bus_id, fake_uuid

    gpus = [
        {
            "uuid": fake_uuid(i), "name": "NVIDIA A100-SXM4-80GB", "pci_bus_id": fake_bus_id(i),
            "memory_total": 80 << 30, "memory_used": 0, "util": 0, "mem_util": 0,
            "power_mw": 62000, "power_limit_mw": 400000, "temp": 34, "pstate": 0,
            "processes": [], "errors": {},
        }
        for i in range(8)
    ]  # fmt: skip

    def write_state() -> None:
        tmp = state + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"driver": "550.54.15", "cuda": 12040, "errors": {}, "gpus": gpus}, f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, state)

    write_state()
    log = open(os.path.join(top, "daemon.out"), "wb")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "daemon", "--foreground", "--http",
         "127.0.0.1:0", "--poll-interval", "0.5"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
    )  # fmt: skip
    # (users' children import NVML's binding before they drop root: dana's claim reads GPUs)
    as_users = users.AsUser(preload=("ctypes.util", "pynvml", "berth.devices.nvml"))
    try:
        from berth.client import Client

        for _ in range(200):
            try:
                with Client(env["BERTH_SOCKET"]) as c:
                    reply = c.call("web_token")
                break
            except Exception:
                time.sleep(0.05)
        url = reply["url"]
        os.chmod(env["BERTH_SOCKET"], 0o666)  # (a shared daemon: every user submits)
        rng = random.Random(14)

        def claim() -> None:
            from berth.api.lease import build_request, claim

            HELD.append(claim(build_request(1, only="7"), timeout=30))

        as_users.start("dana", claim, hold=True)  # a daemonless `berth run`
        for user in ("alice", "bob", "chen"):
            home = os.path.join(top, user)
            os.mkdir(home)
            pw = pwd.getpwnam(user)
            os.chown(home, pw.pw_uid, pw.pw_gid)
        for k in range(45):
            user = ("alice", "bob", "chen")[(k * 7) % 3 if k % 5 else 1]
            g = rng.choice((1, 1, 1, 2, 2, 0.5, 0.5, 4))
            steps = rng.choice((15, 25, 40, 60, 90, 200, 400))
            home = os.path.join(top, user)
            name = NAMES[k % len(NAMES)]
            wrap = (
                f"i=0; while [ $i -lt {steps} ]; do i=$((i+1)); "
                f'echo "{name} step $i/{steps} loss 0.$(( (i*7919 + {k}*31) % 900 + 100 ))"; '
                "sleep 1; done"
            )
            spec = {
                "wrap": wrap, "name": name, "gpus": g, "hold": k % 11 == 5,
                "time_limit": 7200.0, "env": {"PATH": "/usr/bin:/bin"}, "cwd": home,
                "stdout": os.path.join(home, "%j.out"),
            }  # fmt: skip

            def submit(spec: dict[str, Any] = spec) -> None:
                with Client(env["BERTH_SOCKET"]) as c:
                    c.call("submit", job=spec)

            as_users.start(user, submit)
            time.sleep(0.3)
        deadline = time.time() + args.seconds
        base = {i: rng.uniform(55, 95) for i in range(8)}
        level = dict(base)
        while time.time() < deadline:
            with urllib.request.urlopen(url + "api/state", timeout=5) as r:
                st = json.load(r)
            for g in st["gpus"]:
                i, n = (
                    g["index"],
                    sum(float(h.get("share") or 1) for h in g["holders"] if h["kind"] != "outside"),
                )
                gpu = gpus[i]
                busy = min(1.0, n)
                level[i] = min(
                    99.0, max(20.0, level[i] + rng.uniform(-4, 4) + (base[i] - level[i]) * 0.1)
                )
                gpu["util"] = int(busy * level[i])
                frac = 0.25 + 0.6 * base[i] / 100 + rng.uniform(-0.03, 0.03)
                gpu["memory_used"] = int(busy * frac * (80 << 30))
                gpu["mem_util"] = int(gpu["util"] * 0.45)
                gpu["power_mw"] = 62000 + gpu["util"] * 3200
                gpu["temp"] = 34 + gpu["util"] // 3
            write_state()
            time.sleep(1.0)
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1400,1000", "--hide-scrollbars", "--force-device-scale-factor=1"):  # fmt: skip
            opts.add_argument(a)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            driver.get(f"{url}#token={reply['token']}")
            time.sleep(3)
            driver.execute_script(  # follow a running job's log
                "const r = document.querySelector(\"#queue tr[data-state='RUNNING']\"); if (r) r.click();"
            )
            time.sleep(3)
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1400, height + 20)
            time.sleep(1.5)
            driver.save_screenshot(args.out)
        finally:
            driver.quit()
        print(f"saved {args.out} ({url})")
        return 0
    finally:
        as_users.cleanup()
        _cancel_all(env["BERTH_SOCKET"])  # (as root: every user's jobs)
        daemon.terminate()
        daemon.wait()
        shutil.rmtree(top, ignore_errors=True)


def _cancel_all(socket: str) -> None:
    """Cancel every unfinished job and wait until none runs (the daemon ends them)."""
    from berth.client import Client

    try:
        with Client(socket) as c:
            ids = [j["id"] for j in c.call("queue")["jobs"]]
            if ids:
                c.call("cancel", job_ids=ids)
            for _ in range(300):
                if not c.call("queue")["jobs"]:
                    return
                time.sleep(0.1)
    except Exception as e:
        print(f"cleanup: {e}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
