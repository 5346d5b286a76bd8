"""Who this process is to a monitor outside it: its devices' UUIDs (NVML's names for the GPUs that
CUDA numbers from 0 after CUDA_VISIBLE_DEVICES) and its pid namespace (in a container, os.getpid()
is not the host's pid that NVML reports). The manifest carries both; the monitor joins on them."""
import os


def device_uuid(props):
    """A device's UUID as NVML spells it ("GPU-" and 8-4-4-4-12 hex), from
    torch.cuda.get_device_properties(): torch 2.x gives a _CUuuid whose str() is the bare UUID.
    None where torch does not say."""
    u = getattr(props, "uuid", None)
    if u is None:
        return None
    text = str(u).strip().lower()
    if text.startswith(("gpu-", "mig-")):
        return text[:3].upper() + text[3:]
    if len(text.replace("-", "")) == 32 and all(c in "0123456789abcdef-" for c in text):
        return "GPU-" + text
    raw = getattr(u, "bytes", None)
    try:
        raw = bytes(raw) if raw is not None else b""
    except (TypeError, ValueError):
        raw = b""
    if len(raw) == 16:
        h = raw.hex()
        return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
    return None


def device_uuids(torch, devices):
    """The UUID of each CUDA index in `devices` (None where it cannot be read)."""
    out = []
    for i in devices:
        try:
            out.append(device_uuid(torch.cuda.get_device_properties(i)))
        except Exception:
            out.append(None)
    return out


def pid_namespace(path="/proc/self/ns/pid"):
    """The inode of this process's pid namespace; None where unreadable."""
    try:
        return os.stat(path).st_ino
    except OSError:
        pass
    try:
        link = os.readlink(path)
        if link.startswith("pid:[") and link.endswith("]"):
            return int(link[5:-1])
    except (OSError, ValueError):
        pass
    return None
