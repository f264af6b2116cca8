"""The accuracy a registration can reach on a plate with known origins: the
Cramer-Rao bound of each pair's offset and, through an exact weighted
least-squares solve, the distribution of the plate's worst tile
(bench/register_crb.py prints it beside tessera's; test_register_robust.py
checks tessera against it).

The bound of one pair: two tiles see the same scene s through independent
read noise (variance sigma^2 = noise^2 + 1/12 for the rounding to integers);
the scene is unknown to the estimator. Linearised at the true offset, the
Fisher information of the offset d is J = sum over the overlap of
grad s grad s^T / (2 sigma^2) (the difference of the two views carries d,
their mean carries s): pair_information, with grad s the spectral
derivative of the scene (the band-limited interpolation a sub-pixel shift
assumes). Where the scene's detail is fainter than the noise that is not
reachable: pair_information_tde is the time-delay bound, which also
charges for learning the scene from the noisy views.

Meaningful for smooth, band-limited specimens under read noise (the
phase-contrast recipes): for sharp or aliased content (galaxies, SEM) the
spectral derivative promises far more than any interpolation of the
pixels delivers, and the bound is 10-20x below every method.
"""
import numpy as np


def plate_infos(p, img, gy, gx, tile, sigma2):
    """The information of every pair of a plate's tiles with content, by
    kind: {"gradient": grid neighbours (tessera's pairs) with
    pair_information, "time_delay": the same with pair_information_tde,
    "time_delay_all": every overlap, diagonal neighbours too}, each a dict
    {(i, j): J} over indices into the content tiles (sorted names), and
    those tiles."""
    th, tw = (tile, tile) if np.isscalar(tile) else tile
    content = [n for n in sorted(p["origins"]) if n not in p["blank"]]
    infos = {"gradient": {}, "time_delay": {}, "time_delay_all": {}}
    for i, a in enumerate(content):
        for j, b in enumerate(content):
            if j <= i:
                continue
            oa, ob = p["origins"][a], p["origins"][b]
            J = pair_information(gy, gx, oa, ob, th, tw, sigma2)
            if J is None:
                continue
            Jt = pair_information_tde(img, gy, gx, oa, ob, th, tw, sigma2)
            infos["time_delay_all"][(i, j)] = Jt
            if abs(int(a[:3]) - int(b[:3])) + abs(int(a[3:]) - int(b[3:])) == 1:
                infos["gradient"][(i, j)] = J
                infos["time_delay"][(i, j)] = Jt
    return infos, content


def spectral_gradient(img):
    """d/dy, d/dx of the band-limited interpolant (symmetric extension, so
    the borders add no jump)."""
    h, w = img.shape
    ext = np.concatenate([img, img[::-1]], axis=0)
    ext = np.concatenate([ext, ext[:, ::-1]], axis=1)
    f = np.fft.fft2(ext)
    ky = 2j * np.pi * np.fft.fftfreq(2 * h)[:, None]
    kx = 2j * np.pi * np.fft.fftfreq(2 * w)[None, :]
    # The Nyquist frequency's derivative is not defined for real signals.
    if h > 0:
        ky[h, 0] = 0
    if w > 0:
        kx[0, w] = 0
    gy = np.real(np.fft.ifft2(f * ky))[:h, :w]
    gx = np.real(np.fft.ifft2(f * kx))[:h, :w]
    return gy, gx


def pair_information(gy, gx, oa, ob, th, tw, sigma2):
    """Fisher information of the offset of two tiles at origins oa, ob, or
    None where they do not overlap."""
    y0, y1 = max(oa[0], ob[0]), min(oa[0], ob[0]) + th
    x0, x1 = max(oa[1], ob[1]), min(oa[1], ob[1]) + tw
    if y1 <= y0 or x1 <= x0:
        return None
    a, b = gy[y0:y1, x0:x1].ravel(), gx[y0:y1, x0:x1].ravel()
    return np.array([[a @ a, a @ b], [a @ b, b @ b]]) / (2.0 * sigma2)


def pair_information_tde(img, gy, gx, oa, ob, th, tw, sigma2):
    """The same offset's information where the estimator must also learn
    the scene from the two noisy views: the time-delay bound of two sensors
    of one random signal (Knapp and Carter 1976), per frequency
    omega omega^T P^2 / (sigma^2 (2 P + sigma^2)), P the scene's power there;
    at high signal-to-noise it is pair_information's, where P < sigma^2 it
    falls as P^2: a faint texture under read noise cannot be followed to
    the precision its gradients alone promise (the generalised
    cross-correlation with that weighting reaches it). Per axis, the share
    of pair_information that survives, from the periodogram of the overlap
    (symmetric extension): pair_information scaled by it, so that the edges
    of a small crop, which the periodogram sees as detail, count in both."""
    J = pair_information(gy, gx, oa, ob, th, tw, sigma2)
    if J is None:
        return None
    y0, y1 = max(oa[0], ob[0]), min(oa[0], ob[0]) + th
    x0, x1 = max(oa[1], ob[1]), min(oa[1], ob[1]) + tw
    s = img[y0:y1, x0:x1]
    s = s - s.mean()
    h, w = s.shape
    ext = np.concatenate([s, s[::-1]], axis=0)
    ext = np.concatenate([ext, ext[:, ::-1]], axis=1)
    # Unitary: white noise of variance sigma2 has power sigma2 in every bin.
    P = np.abs(np.fft.fft2(ext)) ** 2 / ext.size
    wy2 = (2 * np.pi * np.fft.fftfreq(2 * h)[:, None]) ** 2
    wx2 = (2 * np.pi * np.fft.fftfreq(2 * w)[None, :]) ** 2
    keep = P / (2 * P + sigma2) * 2  # 1 at high signal-to-noise
    share = [float((keep * P * k).sum() / max((P * k).sum(), 1e-300)) for k in (wy2, wx2)]
    d = np.diag(np.sqrt(share))
    return d @ J @ d


def components(n, edges):
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for i, j in edges:
        parent[find(i)] = find(j)
    return [find(i) for i in range(n)]


def worst_tile_draws(n, infos, rng, draws):
    """Worst tile error (median offset removed) of `draws` plates measured by
    an efficient estimator: {pair (i, j): J}. Only the largest group of tiles
    counts (another group's offset is not measured by any pair)."""
    L = np.zeros((2 * n, 2 * n))
    for (i, j), J in infos.items():
        for u, su in ((i, -1.0), (j, 1.0)):
            for v, sv in ((i, -1.0), (j, 1.0)):
                L[2 * u:2 * u + 2, 2 * v:2 * v + 2] += su * sv * J
    root = components(n, list(infos))
    main = max(set(root), key=root.count)
    keep = [i for i in range(n) if root[i] == main]
    idx = np.array([[2 * i, 2 * i + 1] for i in keep]).ravel()
    Lm = L[np.ix_(idx, idx)]
    lam, V = np.linalg.eigh(Lm)
    good = lam > lam.max() * 1e-12
    # x = V diag(1/sqrt(lam)) z on the measured subspace; the gauge's null
    # vectors (one group translation) get no variance.
    x = (V[:, good] / np.sqrt(lam[good])) @ rng.standard_normal((good.sum(), draws))
    x = x.reshape(len(keep), 2, draws)
    x -= np.median(x, axis=0, keepdims=True)
    return np.hypot(x[:, 0], x[:, 1]).max(axis=0)


# Bands of a pair's bound (the larger axis's standard deviation, px). Under
# 0.06 px the pair sees sharp detail, where the bound's band-limited
# derivative promises more than interpolating the pixels gives (module
# docstring): there tessera's errors are 1.6-1.8 deviations on the
# phase-contrast recipes, yet 0.03-0.07 px. From 0.06 px up are the pairs
# that leave a tile its uncertainty, and the worst tile's.
SD_BANDS = ((0.0, 0.06), (0.06, 0.1), (0.1, 0.15), (0.15, np.inf))
SD_MATTERS = 0.06


def pair_errors(p, content, infos, measured):
    """(i, j), J and the error (px, y x) of each pair of infos (keys into
    content, plate_infos) that measured ({(a, b): (dy, dx)} by tile names,
    a shifts file's pairs) holds, against the plate p's origins."""
    for (i, j), J in infos.items():
        a, b = content[i], content[j]
        if (a, b) in measured:
            yield (i, j), J, np.subtract(measured[(a, b)], np.subtract(p["origins"][b], p["origins"][a]))


def errors_in_sd(e, J):
    """A pair's error e (px, y x) per axis in units of its bound's standard
    deviation (J's inverse), and the larger deviation (px)."""
    sd = np.sqrt(np.diag(np.linalg.inv(J)))
    return np.abs(np.asarray(e, dtype=np.float64)) / sd, float(sd.max())


def rms_by_band(zs, sds, errs):
    """Per SD_BANDS band with pairs: (lo, hi, pairs, rms of the per-axis
    errors in deviations (1 for an efficient estimator), rms error px)."""
    zs, sds, errs = np.asarray(zs), np.asarray(sds), np.asarray(errs)
    out = []
    for lo, hi in SD_BANDS:
        m = (sds >= lo) & (sds < hi)
        if m.any():
            out.append((lo, hi, int(m.sum()), float(np.sqrt((zs[m] ** 2).mean())),
                        float(np.sqrt((errs[m] ** 2).mean()))))
    return out
