"""Device strings: ``HETERO:GPU,CPU``, ``HETERO`` with priorities from configuration, or one device."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import DeviceError, DeviceUnavailableError
from . import devices as registry
from .devices import Device

log = logging.getLogger("hetero_cli")

HETERO = "HETERO"


def split_device(text: str) -> tuple[str, str | None]:
    """A device string's head, stripped and upper-cased, and what follows its first ``:`` (None without
    one): ``"hetero: GPU,CPU"`` gives ``("HETERO", " GPU,CPU")``. The one reader of the HETERO prefix."""
    head, sep, tail = text.strip().partition(":")
    return head.strip().upper(), tail if sep else None


def is_hetero(text: object) -> bool:
    """Whether a device string asks for HETERO (``HETERO`` alone or ``HETERO:<devices>``); False for
    anything but a string (parse says what is wrong with it)."""
    return isinstance(text, str) and split_device(text)[0] == HETERO


def is_hetero_name(name: str) -> bool:
    """Whether a device name (a property's device, a config's key) is HETERO itself, in any case."""
    return name.upper() == HETERO


@dataclass(frozen=True)
class DeviceRequest:
    """What a device string asks for: the devices in priority order, and whether it is HETERO."""

    hetero: bool
    priorities: tuple[Device, ...]

    @property
    def names(self) -> list[str]:
        """Canonical device names, high priority first."""
        return [d.name for d in self.priorities]

    def __str__(self) -> str:
        return f"HETERO:{','.join(self.names)}" if self.hetero else self.names[0]


def _fail(text: str, why: str) -> DeviceError:
    return DeviceError(
        f"bad device string {registry.shown(text)}: {why}. Write HETERO:<device>,<device>,... (highest priority first) "
        f"or one device name; known devices are {registry.known_names_text()}"
    )


def _bad_priorities(text: str, why: str) -> DeviceError:
    return DeviceError(
        f"bad MULTI_DEVICE_PRIORITIES {registry.shown(text)} (the devices HETERO alone runs on): {why}. Set it to device "
        f"names, highest priority first, such as OPENVINO,CPU; known devices are {registry.known_names_text()}"
    )


def parse_priorities(
    text: str, *, whole: str | None = None, fail: Callable[[str, str], DeviceError] = _fail
) -> tuple[Device, ...]:
    """Parse a comma-separated device list such as ``"GPU, CPU"`` into devices, refusing bad lists
    (``fail(whole, why)`` makes the error: a bad device string by default)."""
    whole = text if whole is None else whole
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise fail(whole, "the device list is empty" if not text.strip() else "it has an empty device name")
    devices: list[Device] = []
    for part in parts:
        if part.upper().startswith(HETERO):
            raise fail(whole, "HETERO cannot be listed inside HETERO")
        try:
            device = registry.lookup(part)
        except DeviceError:
            # the one device of the list is the string itself: named once, in ``fail``'s words
            raise fail(
                whole, f"unknown device {registry.shown(part)}" if len(parts) > 1 else "unknown device"
            ) from None
        if device in devices:
            raise fail(whole, f"{device.name} is listed twice")
        devices.append(device)
    return tuple(devices)


def parse(text: str, default_priorities: str | None = None) -> DeviceRequest:
    """Parse a device string; ``HETERO`` alone takes ``default_priorities`` (MULTI_DEVICE_PRIORITIES)."""
    if not isinstance(text, str):
        raise DeviceError(
            f'a device string must be a string such as "CPU" or "HETERO:OPENVINO,CPU" (highest priority '
            f"first), not {type(text).__name__} {text!r:.60}; known devices are {registry.known_names_text()}"
        )
    if not text.strip():
        raise _fail(text, "it is empty")
    stripped = text.strip()
    head, tail = split_device(stripped)
    if head == HETERO:
        if tail is not None:
            return DeviceRequest(True, parse_priorities(tail, whole=text))
        if not default_priorities:
            raise _fail(
                text,
                "HETERO alone needs priorities: set the config key MULTI_DEVICE_PRIORITIES (e.g. "
                "--config MULTI_DEVICE_PRIORITIES=GPU,CPU on the command line), or write HETERO:GPU,CPU",
            )
        return DeviceRequest(True, parse_priorities(default_priorities, fail=_bad_priorities))
    if tail is not None or "," in stripped:
        raise _fail(text, "a device list needs the HETERO: prefix")
    try:
        return DeviceRequest(False, (registry.lookup(stripped),))
    except DeviceError:
        raise _fail(text, "unknown device") from None


def available_priorities(request: DeviceRequest) -> tuple[Device, ...]:
    """The request's devices that can run here; logs one line per skipped device; none left is an error."""
    kept = []
    reasons = []
    for device in request.priorities:
        reason = registry.unavailable_reason(device)
        if reason is None:
            kept.append(device)
        else:
            reasons.append(f"{device.name}: {reason}")
            if request.hetero:
                log.warning("%s is not available, skipping it: %s", device.name, reason)
    if not kept:
        raise DeviceUnavailableError(
            f"no device of {request} is available on this machine: {'; '.join(reasons)}. "
            f"Available here: {', '.join(registry.available_devices())}"
        )
    return tuple(kept)
