"""Speech-enhancement metrics used by bench/denoise.py (all on 16 kHz mono float arrays)."""
import numpy as np

FRAME = 320  # 20 ms at 16 kHz


def si_sdr(ref, est):
    """Scale-invariant SDR in dB (Le Roux et al. 2019), zero-mean signals."""
    ref = ref - ref.mean()
    est = est - est.mean()
    a = np.dot(est, ref) / (np.dot(ref, ref) + 1e-20)
    t = a * ref
    return float(10 * np.log10((np.sum(t ** 2) + 1e-20) / (np.sum((est - t) ** 2) + 1e-20)))


def lag(ref, est, max_lag=4000):
    """The delay of est against ref in samples (peak of the cross-correlation, |lag| <= max_lag)."""
    n = len(ref) + len(est)
    r = np.fft.irfft(np.fft.rfft(est, n) * np.conj(np.fft.rfft(ref, n)), n)
    cand = np.concatenate([r[:max_lag + 1], r[-max_lag:]])
    k = int(np.argmax(cand))
    return k if k <= max_lag else k - len(cand)


def align(est, delay, n):
    """est advanced by delay samples, cut or zero-padded to n."""
    est = est[delay:] if delay >= 0 else np.concatenate([np.zeros(-delay), est])
    return np.pad(est[:n], (0, max(0, n - len(est))))


def frames(x):
    m = len(x) // FRAME
    return x[:m * FRAME].reshape(m, FRAME)


def active_frames(clean, below_peak_db=40):
    e = (frames(clean) ** 2).mean(axis=1)
    return e > e.max() * 10 ** (-below_peak_db / 10)


def silent_frames(clean, below_peak_db=60):
    e = (frames(clean) ** 2).mean(axis=1)
    return e < e.max() * 10 ** (-below_peak_db / 10)


def seg_snr(clean, est):
    """Segmental SNR (dB): 20 ms frames where speech is active, each clamped to [-10, 35]."""
    c, e = frames(clean), frames(est)
    snr = 10 * np.log10((c ** 2).sum(1) / ((c - e) ** 2).sum(1).clip(1e-20) + 1e-20)
    return float(np.clip(snr, -10, 35)[active_frames(clean)].mean())


def noise_attenuation(clean, noisy, est):
    """How far the output is below the input where there is no speech (dB), or None."""
    s = silent_frames(clean)
    if s.sum() < 10:
        return None
    pin = (frames(noisy)[s] ** 2).sum()
    pout = (frames(est)[s] ** 2).sum()
    return float(10 * np.log10((pin + 1e-20) / (pout + 1e-20)))
