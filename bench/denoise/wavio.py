"""WAV reading/writing and resampling shared by the denoise bench scripts.

Reads any PCM/float WAV through the stdlib wave module or numpy (no soundfile needed),
returns float64 mono in [-1, 1] and the rate.
"""
import struct

import numpy as np


def read_wav(path):
    """Returns (samples float64 [n] mono, rate). Multichannel input is averaged."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError(f"{path}: not a RIFF/WAVE file")
    pos, fmt, pcm = 12, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if cid == b"fmt ":
            fmt = struct.unpack("<HHIIHH", body[:16])
            if fmt[0] == 0xFFFE and len(body) >= 26:  # WAVE_FORMAT_EXTENSIBLE: subformat's first 2 bytes
                fmt = (struct.unpack("<H", body[24:26])[0],) + fmt[1:]
        elif cid == b"data":
            pcm = body
        pos += 8 + size + (size & 1)
    if fmt is None or pcm is None:
        raise ValueError(f"{path}: no fmt or data chunk")
    tag, channels, rate, _, _, bits = fmt
    if tag == 1 and bits == 16:
        x = np.frombuffer(pcm[: len(pcm) // 2 * 2], "<i2").astype(np.float64) / 32768.0
    elif tag == 1 and bits == 32:
        x = np.frombuffer(pcm[: len(pcm) // 4 * 4], "<i4").astype(np.float64) / 2147483648.0
    elif tag == 1 and bits == 24:
        b = np.frombuffer(pcm[: len(pcm) // 3 * 3], np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = (np.where(v >= 1 << 23, v - (1 << 24), v)).astype(np.float64) / float(1 << 23)
    elif tag == 3 and bits == 32:
        x = np.frombuffer(pcm[: len(pcm) // 4 * 4], "<f4").astype(np.float64)
    elif tag == 3 and bits == 64:
        x = np.frombuffer(pcm[: len(pcm) // 8 * 8], "<f8").copy()
    else:
        raise ValueError(f"{path}: unsupported WAV format tag {tag} with {bits} bits")
    x = x[: len(x) // channels * channels].reshape(-1, channels).mean(axis=1)
    return x, rate


def write_wav(path, x, rate, float32=False):
    """Writes mono; S16 (clipped) by default, float32 when asked (keeps the oracle exact)."""
    x = np.asarray(x, np.float64)
    if float32:
        pcm = x.astype("<f4").tobytes()
        tag, bits = 3, 32
    else:
        pcm = (np.clip(np.round(x * 32768.0), -32768, 32767)).astype("<i2").tobytes()
        tag, bits = 1, 16
    block = bits // 8
    fmt = struct.pack("<HHIIHH", tag, 1, rate, rate * block, block, bits)
    if tag == 3:
        fmt += struct.pack("<H", 0)  # cbSize: non-PCM formats carry it
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(pcm)) + b"WAVE")
        f.write(b"fmt " + struct.pack("<I", len(fmt)) + fmt)
        f.write(b"data" + struct.pack("<I", len(pcm)) + pcm)


def resample(x, rate_in, rate_out):
    """Band-limited polyphase resampling (scipy when present, else FFT resampling)."""
    if rate_in == rate_out:
        return np.asarray(x, np.float64)
    from math import gcd
    g = gcd(rate_in, rate_out)
    try:
        from scipy.signal import resample_poly
        return resample_poly(x, rate_out // g, rate_in // g)
    except ImportError:
        n = int(round(len(x) * rate_out / rate_in))
        X = np.fft.rfft(x)
        m = n // 2 + 1
        Y = np.zeros(m, complex)
        k = min(m, len(X))
        Y[:k] = X[:k]
        return np.fft.irfft(Y, n) * (n / len(x))
