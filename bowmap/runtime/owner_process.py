"""A device owner (bowmap.runtime.owner.DeviceOwner) in a process of its own, one a device:
:class:`OwnerProcess`, and the process's body."""

from __future__ import annotations

import multiprocessing.process
import os
import secrets
import sys
import threading
import time

from bowmap.runtime import usage
from bowmap.runtime.devices import context_for_info, forking_quietly, list_devices, parse_device_spec
from bowmap.runtime.errors import BowmapError
from bowmap.runtime.owner import DeviceOwner
from bowmap.runtime.remote import listening

_UNREAD = object()  # OwnerProcess._devices before the owner's list is read


class OwnerProcess:
    """A :class:`DeviceOwner` in a process of its own, one a device.

    Why: the owner's serving threads hold the GIL for every batch they unpack and launch; in the
    run's main process they shared it with the reader and the writer, and two devices' owners
    would share it with each other. Its own process gives each owner a GIL of its own.

    The process starts at once and waits for its work: :meth:`serve` sends ``open_device`` and
    ``shared`` (as DeviceOwner's, picklable); given here, they are sent at once. It is spawned,
    or with ``start_method="fork"`` forked, which spares it the interpreter's start and the
    imports (about 0.7 s of a run's start on the GPU machine): allowed only in a process that has
    made no OpenCL call yet (see bowmap.runtime.devices.may_fork_device_users), so that the
    child opens the driver itself. The socket's address is chosen here, so :attr:`endpoint` is
    known at once; the process listens as soon as it runs, so that clients which come before
    the owner is made (a forked owner opens its device first) wait in the connection queue, and
    those that come earlier still (a spawned process's start) wait for it (see
    bowmap.runtime.remote._connect). The process ends when :meth:`close` is called or this
    process's end of the control pipe closes (this process died).

    ``prepare``: a forked owner lists the devices at once, hands the list to this process
    (:meth:`devices`), and opens the first device that ``spec`` (a ``--devices`` spec, None for
    bowmap's default) selects while this process plans its layout; :meth:`serve` given that
    device's ``info`` then takes the context opened, any other opens its own. Why: the owner's
    platform list and context (0.18 s on an H200) were the first chunk's wait in a small run,
    begun only once this process had listed the devices itself (0.14 s); and two processes
    opening the driver at once slowed each other."""

    def __init__(self, open_device=None, shared=None, name: str = "device", start_method: str = "spawn",
                 prepare: bool = False, spec: str | None = None):
        import multiprocessing
        import signal
        from multiprocessing.connection import arbitrary_address

        context = multiprocessing.get_context(start_method)
        self.authkey = secrets.token_bytes(32)
        self.address = arbitrary_address("AF_UNIX")
        self._control, child = context.Pipe()
        self._set_up: dict | None = None
        self._devices = _UNREAD if prepare else None  # see devices()
        self._served = False
        self.process = context.Process(target=_owner_process, args=(self.address, self.authkey, child, prepare, spec),
                                       daemon=True, name="bowmap-owner")
        # SIGINT blocked while it starts, so a ^C then reaches this process alone (the owner
        # ignores it: the run ends it through close()).
        masked = hasattr(signal, "pthread_sigmask")
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if masked else None
        try:
            with forking_quietly():
                self.process.start()
        finally:
            if masked:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        child.close()
        if open_device is not None:
            self.serve(open_device, shared, name)

    def devices(self) -> list | None:
        """The devices a ``prepare``-d owner listed (bowmap.runtime.devices.list_devices), once it
        has; None where it was not asked to or could not (then list them here)."""
        if self._devices is _UNREAD:
            self._devices = None
            try:
                message = self._control.recv()
                if message[0] == "devices":
                    self._devices = message[1]
            except (EOFError, OSError):
                pass
        return self._devices

    def serve(self, open_device, shared, name: str = "device", info=None) -> OwnerProcess:
        """Open the device and share its buffers (``name``: the owner's, in its usage file);
        ``info``: the device's DeviceInfo, whose context the owner may have opened already
        (see ``prepare``)."""
        try:
            self._control.send(("serve", open_device, shared, name, info))
        except OSError:  # a standby that died while it opened its device (a driver's abort, a kill)
            self.process.join(timeout=1)
            raise BowmapError(f"the device owner process exited before its work came (exit code {self.process.exitcode})") from None
        self._served = True
        return self

    @property
    def endpoint(self) -> tuple:
        """What a client needs to reach this owner (picklable): RemoteDevice's arguments after its info."""
        return self.address, self.authkey, self.process.pid

    @property
    def set_up_seconds(self) -> dict:
        """The owner's set-up times once it has reported them (else empty): context and upload."""
        if self._set_up is None:
            try:
                if self._devices is _UNREAD and self._control.poll():
                    self.devices()  # its list comes first
                if self._control.poll():
                    status, value = self._control.recv()
                    self._set_up = value if status == "ready" else {}
            except (EOFError, OSError):
                self._set_up = {}
        return self._set_up or {}

    def close(self, wait: bool = True) -> None:
        """Stop the owner. ``wait=False``: once it says it has stopped serving (its usage file
        written), leave its process to end on its own; neither this call nor this interpreter's
        exit waits for it. Why: its end is the driver's teardown of the context (the device's
        memory, the arenas' pinned pages), 0.14 s of a chr20 run's wind-down on an H200, and
        nothing of the run waits for it. An owner never served is left at once: it has no usage
        file to write, and it may be opening its device still (see ``prepare``)."""
        _reap()
        try:
            self._control.send("stop")
        except (OSError, EOFError):
            pass
        if not wait and (not self._served or self._stopped()):
            # multiprocessing joins every child it knows of at exit: this one it forgets (its
            # only record of them), and _reap joins it later.
            getattr(multiprocessing.process, "_children", set()).discard(self.process)
            _DETACHED.append(self.process)
        else:
            self.process.join(timeout=10)
            if self.process.is_alive():
                self.process.terminate()
                self.process.join(timeout=5)
        self._control.close()

    def _stopped(self, seconds: float = 10.0) -> bool:
        """Whether the owner said it stopped serving within ``seconds`` (earlier messages skipped)."""
        deadline = time.monotonic() + seconds
        try:
            while self._control.poll(max(0.0, deadline - time.monotonic())):
                if self._control.recv() == "stopped":
                    return True
        except (EOFError, OSError):
            pass
        return False


_DETACHED: list = []  # owner processes left to end on their own (OwnerProcess.close)


class _PreparedDevice:
    """In a forked owner: the devices listed and sent to the run's process (a ("devices", list)
    message first on ``control``, the list None where listing failed), then the context of the
    first that ``spec`` selects, opened in a thread while the owner waits for its work (see
    OwnerProcess's ``prepare``). Any failure leaves it unused: the device asked for is then
    opened as if nothing had been prepared, and its errors are that opening's."""

    def __init__(self, spec, control):
        self._info = self._device = None
        self.taken = False  # whether the owner's device is the one prepared
        try:
            listed = list_devices()
        except Exception:  # noqa: BLE001 - the run's process lists them itself and reports the error
            listed = None
        usage.mark("standby listed")
        control.send(("devices", listed))
        self._thread = threading.Thread(target=self._open, args=(spec, listed or []), daemon=True, name="bowmap-owner-prepare")
        self._thread.start()

    def _open(self, spec, listed) -> None:
        try:
            infos = parse_device_spec(spec, listed, builds=lambda info: True)
            self._device = context_for_info(infos[0])
            usage.mark("standby context")
            self._info = infos[0]
        except Exception:  # noqa: BLE001 - see the class's docstring
            pass

    def opener(self, open_device, info):
        """``open_device``, or the context prepared when it is ``info``'s."""

        def opened():
            self._thread.join()
            self.taken = info is not None and self._info == info
            if not self.taken:
                self._device = None  # released: another device is opened (or the same, by info unknown)
                return open_device()
            return self._device

        return opened


def _reap() -> None:
    """Collect the detached owner processes that have ended."""
    for process in list(_DETACHED):
        process.join(timeout=0)
        if process.exitcode is not None:
            _DETACHED.remove(process)


def _owner_process(address, authkey: bytes, control, prepare: bool = False, spec: str | None = None) -> None:
    """An owner process's body: wait for its work (OwnerProcess.serve), opening a device
    meanwhile where asked to (``prepare``), serve until told to stop or orphaned, then leave at
    once (a device still being prepared is left to the system)."""
    import signal

    started = time.monotonic()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run stops the owner itself
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # forked, it has its parent's handler (see runners._worker_process)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    owner = listener = None
    name = "device"
    try:
        # Listening at once: host workers that come before the owner is made (forked while its
        # device opens) wait in the connection queue, not in growing sleeps (remote._connect).
        listener = listening(address, authkey)
        prepared = _PreparedDevice(spec, control) if prepare else None
        try:
            message = control.recv()
        except (EOFError, OSError):
            message = "stop"  # the run's process is gone
        if message != "stop":
            _, open_device, shared, name, info = message
            usage.mark("owner served")
            if prepared is not None:
                open_device = prepared.opener(open_device, info)
            owner = DeviceOwner(open_device, shared, address, authkey, listener=listener)
            try:
                owner.wait_ready()
                control.send(("ready", {**owner.set_up_seconds, "prepared": prepared is not None and prepared.taken}))
            except BaseException as error:  # noqa: BLE001 - the clients get it with their requests
                control.send(("failed", str(error)))
            try:
                control.recv()
            except (EOFError, OSError):
                pass  # the run's process is gone
    finally:
        if owner is not None:
            owner.close()
            if usage.FOLDER:
                usage.write_usage(os.path.join(usage.FOLDER, f"owner-{name}.usage.json"), started)
            if usage.TIMELINE:
                usage.write_timeline(os.path.join(usage.FOLDER, f"owner-{name}.kernels.json"), owner.timeline)
        elif listener is not None:
            listener.close()  # its socket file (os._exit below skips the finalizer)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            control.send("stopped")  # see OwnerProcess.close
        except (OSError, EOFError):
            pass
        # No interpreter teardown: releasing the context, queues and buffers one by one only
        # holds up the run's end (and NVIDIA's driver may abort in it); the system frees them.
        os._exit(0)
