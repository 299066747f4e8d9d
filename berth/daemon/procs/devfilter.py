"""A job sees only its own GPUs' device files (issue 25.4; Slurm's ``ConstrainDevices``).

With ``[daemon] isolate_devices``, the cgroup of each attempt's supervisor (:mod:`.cgroup`)
gets a device filter before the attempt is handed to it: every device stays open but the
NVIDIA GPUs' character devices (major 195, minors 0-254, ``/dev/nvidiaN``) other than the
attempt's own, whose minor numbers NVML gives (:func:`berth.devices.nvml.minor_numbers`).
``nvidiactl`` (195:255), ``nvidia-uvm``, ``nvidia-modeset`` and ``nvidia-caps`` (majors of
their own) stay open: CUDA needs them. Opening another GPU's file fails with EPERM, so CUDA
and NVML in the job see only its GPUs, whatever ``CUDA_VISIBLE_DEVICES`` says.

Cgroup v2 has no ``devices.deny`` file: the filter is an eBPF program of type
``BPF_PROG_TYPE_CGROUP_DEVICE`` attached to the cgroup, as runc, crun and systemd make them,
here assembled by hand and loaded with bpf(2) through ctypes (no dependency). Its context is
``struct bpf_cgroup_dev_ctx {u32 access_type; u32 major; u32 minor}`` with ``access_type =
access << 16 | type`` (include/uapi/linux/bpf.h); it returns 1 to allow, 0 to refuse::

    r2 = ctx->access_type; w2 &= 0xffff; r4 = ctx->major; r5 = ctx->minor
    if r2 != CHAR goto allow; if r4 != 195 goto allow; if r5 > 254 goto allow
    if r5 == own_1 goto allow; ...; if r5 == own_n goto allow
    r0 = 0; exit
    allow: r0 = 1; exit

It is attached without ``BPF_F_ALLOW_OVERRIDE``/``MULTI``: the next attach replaces it (an
idle supervisor's cgroup gets the next attempt's filter), nothing below it can attach one,
and a program an ancestor holds (systemd's ``DevicePolicy=``) is still asked too. It stays
attached after the daemon exits, for as long as the cgroup lives: an adopted attempt keeps
its filter. The daemon is root; a job that is root too could detach it (as with Slurm).

On cgroup v1 (jobs in the ``freezer`` or ``pids`` hierarchy: :mod:`.cgroup`), the
``devices`` controller does it (:class:`V1Filter`): each supervisor joins a cgroup of the
same name in the ``devices`` hierarchy too, which allows all (``a``) but the other GPUs that
NVML lists (``c 195:N rwm`` in ``devices.deny``), rewritten before each attempt.

Where it cannot be enforced (not root, no cgroup, no devices hierarchy, a kernel or a security
policy that refuses BPF, GPUs whose minor numbers NVML does not give), :func:`find` says why
in one line, which the daemon logs at start and shows (``berth admin log``).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

from berth.daemon.procs.cgroup import V2, mine
from berth.daemon.supervisor.ingroup import members

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from berth.daemon.procs.cgroup import Cgroups

GPU_MAJOR = 195  # /dev/nvidiaN (N < 255) and /dev/nvidiactl (255)
LAST_GPU_MINOR = 254

# bpf(2): its number on each architecture, its commands and constants (uapi/linux/bpf.h)
_NR_BPF = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "s390x": 351, "riscv64": 280}
_PROG_LOAD, _PROG_ATTACH = 5, 8
_PROG_TYPE_CGROUP_DEVICE = 15
_CGROUP_DEVICE = 6  # the attach type
_DEV_CHAR = 2
_ATTR_SIZE = 128  # (the kernel takes a shorter or longer union if the rest is zero)

# eBPF opcodes (uapi/linux/bpf_common.h, bpf.h): class | operation | source
_LDX_W = 0x61  # BPF_LDX | BPF_MEM | BPF_W: dst = *(u32 *)(src + off)
_AND32_K = 0x54  # BPF_ALU | BPF_AND | BPF_K: (u32) dst &= imm
_MOV64_K = 0xB7  # BPF_ALU64 | BPF_MOV | BPF_K: dst = imm
_JNE_K, _JEQ_K, _JGT_K = 0x55, 0x15, 0x25  # BPF_JMP | BPF_JNE/JEQ/JGT | BPF_K: pc += off
_EXIT = 0x95  # BPF_JMP | BPF_EXIT


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """One instruction: struct bpf_insn {u8 code; u8 dst:4, src:4; s16 off; s32 imm}."""
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def program(allowed: Iterable[int]) -> bytes:
    """The filter (see the module) that lets through the GPU minors ``allowed`` only."""
    own = sorted(set(allowed))
    allow = 7 + len(own) + 2  # the index of the "allow" instructions
    head = [
        _insn(_LDX_W, 2, 1, 0),
        _insn(_AND32_K, 2, imm=0xFFFF),
        _insn(_LDX_W, 4, 1, 4),
        _insn(_LDX_W, 5, 1, 8),
        _insn(_JNE_K, 2, off=allow - 5, imm=_DEV_CHAR),
        _insn(_JNE_K, 4, off=allow - 6, imm=GPU_MAJOR),
        _insn(_JGT_K, 5, off=allow - 7, imm=LAST_GPU_MINOR),
    ]
    mine = [_insn(_JEQ_K, 5, off=allow - (8 + i), imm=m) for i, m in enumerate(own)]
    tail = [_insn(_MOV64_K, 0, imm=0), _insn(_EXIT), _insn(_MOV64_K, 0, imm=1), _insn(_EXIT)]
    return b"".join(head + mine + tail)


class DeviceFilter:
    """How the daemon confines its attempts' devices (:class:`BpfFilter` on cgroup v2,
    :class:`V1Filter` on v1): ``minors`` is each GPU's minor number by NVML index."""

    how = ""

    def __init__(self, minors: dict[int, int]) -> None:
        self.minors = minors

    def apply(self, cgroup: str, gpus: Iterable[int]) -> None:
        """Let the processes of ``cgroup`` (a supervisor's) open the device files of ``gpus``
        (NVML indices) and of no other GPU. Raises OSError if it cannot."""
        raise NotImplementedError

    def make(self, cgroup: str) -> str | None:
        """A cgroup more that the supervisor of ``cgroup`` joins, if one is needed (made)."""
        return None

    def remove(self, cgroup: str) -> None:
        """``cgroup`` is gone: so is what :meth:`make` made for it."""

    def sweep(self) -> None:
        """Remove what :meth:`make` made that is empty (the daemon stops, or starts)."""

    def own(self, gpus: Iterable[int]) -> list[int]:
        """The minor numbers of ``gpus``; OSError for one NVML gave none."""
        out = []
        for i in gpus:
            if i not in self.minors:
                raise OSError(f"GPU {i} has no known device file to allow (NVML gave none)")
            out.append(self.minors[i])
        return out


class BpfFilter(DeviceFilter):
    """Cgroup v2: a device program (see the module) on the supervisor's own cgroup."""

    how = "a cgroup v2 device program"

    def apply(self, cgroup: str, gpus: Iterable[int]) -> None:
        prog = _load(program(self.own(gpus)))
        try:
            _attach(prog, cgroup)
        finally:
            os.close(prog)


class V1Filter(DeviceFilter):
    """Cgroup v1: the ``devices`` controller, in a hierarchy of its own (the jobs are in the
    ``freezer`` or ``pids`` one): each supervisor joins a cgroup of the same name under
    ``root`` too, whose ``devices.deny`` lists the other GPUs' files (those NVML knows)."""

    how = "the cgroup v1 devices controller"

    def __init__(self, minors: dict[int, int], root: str) -> None:
        super().__init__(minors)
        self.root = root

    def path(self, cgroup: str) -> str:
        return os.path.join(self.root, os.path.basename(cgroup))

    def make(self, cgroup: str) -> str | None:
        path = self.path(cgroup)
        os.makedirs(path, exist_ok=True)
        return path

    def apply(self, cgroup: str, gpus: Iterable[int]) -> None:
        own = set(self.own(gpus))
        path = self.path(cgroup)
        _write(os.path.join(path, "devices.allow"), "a")  # (all again, then the others out)
        for minor in sorted(set(self.minors.values()) - own):
            _write(os.path.join(path, "devices.deny"), f"c {GPU_MAJOR}:{minor} rwm")

    def remove(self, cgroup: str) -> None:
        try:
            os.rmdir(self.path(cgroup))
        except OSError:
            pass  # (busy: the sweep at the next start)

    def sweep(self) -> None:
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for name in names:
            if name.startswith("s") and not members(os.path.join(self.root, name)):
                self.remove(name)
        try:
            os.rmdir(self.root)  # (if empty: make() makes it again)
        except OSError:
            pass


def find(cgroups: Cgroups | None, minors: dict[int, int | None]) -> tuple[DeviceFilter | None, str]:
    """The filter the daemon can put on its attempts' cgroups, and a line for its log saying
    so, or why it cannot (then None): ``minors`` as :func:`berth.devices.nvml.minor_numbers`
    gives them."""
    head = "[daemon] isolate_devices: "
    if os.geteuid() != 0:
        return None, head + "cannot be enforced: the daemon is not root"
    if cgroups is None:
        return None, head + "cannot be enforced: the jobs have no cgroup of their own"
    unknown = sorted(i for i, m in minors.items() if m is None)
    if unknown or not minors:
        which = ",".join(map(str, unknown))
        return None, head + (
            f"cannot be enforced: NVML gives no device minor number for GPU(s) {which}"
            if unknown
            else "cannot be enforced: no GPU read from NVML (none, or a declared [inventory])"
        )
    known = {i: m for i, m in minors.items() if m is not None}
    filt: DeviceFilter
    if cgroups.kind == V2:
        filt = BpfFilter(known)
    else:
        devices = mine("devices")
        if devices is None:
            return None, head + (
                f"cannot be enforced: jobs are in cgroup v1 ({cgroups.kind}) and the v1 devices "
                "hierarchy is not mounted"
            )
        filt = V1Filter(known, os.path.join(devices, os.path.basename(cgroups.root)))
    probe = os.path.join(cgroups.root, f"probe-dev-{os.getpid()}")
    try:
        os.mkdir(probe)
        try:
            filt.make(probe)
            filt.apply(probe, [])
        finally:
            os.rmdir(probe)
            filt.remove(probe)
    except OSError as e:
        return None, head + f"cannot be enforced: {filt.how} is refused ({e.strerror or e})"
    filt.sweep()
    return filt, head + (
        f"enforced: a job may open /dev/nvidiaN only for its own GPUs ({filt.how} on each "
        "job's cgroup; other devices, nvidiactl and nvidia-uvm stay open)"
    )


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    """bpf(cmd, attr): its result; OSError with errno if it fails."""
    nr = _NR_BPF.get(platform.machine())
    if nr is None:
        raise OSError(f"bpf(2) is not known on {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ret = int(libc.syscall(ctypes.c_long(nr), ctypes.c_int(cmd), attr, ctypes.c_uint(len(attr))))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def _load(code: bytes) -> int:
    """Load a cgroup device program; its descriptor."""
    insns = ctypes.create_string_buffer(code, len(code))
    license = ctypes.create_string_buffer(b"Apache")  # (a device program needs no GPL helper)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    # prog_type, insn_cnt, insns, license (log_level, log_size, log_buf: 0, none)
    struct.pack_into(
        "<IIQQ", attr, 0, _PROG_TYPE_CGROUP_DEVICE, len(code) // 8,
        ctypes.addressof(insns), ctypes.addressof(license),
    )  # fmt: skip
    return _bpf(_PROG_LOAD, attr)


def _attach(prog: int, cgroup: str) -> None:
    """Attach the program ``prog`` to ``cgroup``, in place of the one it had."""
    fd = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY)
    try:
        attr = ctypes.create_string_buffer(_ATTR_SIZE)
        # target_fd, attach_bpf_fd, attach_type, attach_flags (0: one program, replaced)
        struct.pack_into("<IIII", attr, 0, fd, prog, _CGROUP_DEVICE, 0)
        _bpf(_PROG_ATTACH, attr)
    finally:
        os.close(fd)
