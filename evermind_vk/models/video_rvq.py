"""builderforce's VideoRVQ codec (spec §9) on the host, in numpy: frames -> patches -> residual vector
quantisation with two codebook banks (INTRA for key frames, INTER for residuals against the previous
reconstruction) -> token ids of the multimodal vocabulary, and back.

Vocabulary: text ids [0, tV), <vid> = tV, </vid> = tV + 1, <key> = tV + 2, <delta> = tV + 3, code token
tV + 4 + bank*levels*K + level*K + code; size tV + 4 + 2*levels*K.
Frames are float32 [H, W, C] in [0, 1] (or flat H*W*C); patches are patch x patch x C vectors in raster order.

Numbers follow builderforce exactly where its arithmetic is f32 (codebooks, residuals, k-means sums) and
its nearest-codeword search in float64 with ties to the lower index, so token ids are the same.
Host numpy, not the device: encode/decode are sequential over frames and tiny; fit is k-means over
patches (the one data-parallel part, fine on the host for codec-sized data).
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from .moe import SeededRng

DEFAULT_SEED, FIT_SEED = 0x56524651, 0x66697421  # "VRFQ", "fit!"
INTRA, INTER = 0, 1


class SeqRng:
    """SeededRng drawn one value at a time (k-means interleaves its draws with data-dependent work)."""

    def __init__(self, seed: int):
        self.r = SeededRng(seed)

    def next(self) -> float:
        return float(self.r.uniforms(1)[0])


def _nearest(cb: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Index of the nearest row of cb [K, D] for each row of v [n, D]: squared distance summed in float64
    in dimension order, ties to the lower index (builderforce's nearestRow)."""
    d = np.zeros((v.shape[0], cb.shape[0]))
    a, b = v.astype(np.float64), cb.astype(np.float64)
    for k in range(cb.shape[1]):
        diff = a[:, k, None] - b[None, :, k]
        d += diff * diff
    return np.argmin(d, axis=1)


def _kmeans(vectors: np.ndarray, count: int, iterations: int, rng: SeqRng) -> np.ndarray:
    n, dim = vectors.shape
    cent = np.empty((count, dim), np.float32)
    for r in range(count):
        cent[r] = vectors[int(np.floor(rng.next() * n)) % n]
    for _ in range(iterations):
        idx = _nearest(cent, vectors)
        sums = np.zeros((count, dim), np.float32)
        np.add.at(sums, idx, vectors)  # f32, in vector order
        counts = np.bincount(idx, minlength=count)
        for r in range(count):
            if counts[r] == 0:
                cent[r] = vectors[int(np.floor(rng.next() * n)) % n]
            else:
                cent[r] = (sums[r].astype(np.float64) * (1.0 / counts[r])).astype(np.float32)
    return cent


class VideoRVQCodec:
    def __init__(self, height: int, width: int, channels: int = 3, patch: int = 4, levels: int = 2,
                 codebook_size: int = 16, keyframe_interval: int = 12, text_vocab_size: int = 0,
                 seed: int = DEFAULT_SEED):
        if height <= 0 or width <= 0:
            raise ShapeError("VideoRVQCodec: height/width must be > 0")
        if height % patch or width % patch:
            raise ShapeError(f"VideoRVQCodec: height/width must be divisible by patch ({patch})")
        if text_vocab_size < 0 or levels <= 0 or codebook_size <= 0:
            raise ShapeError("VideoRVQCodec: textVocabSize must be ≥ 0, levels and codebookSize > 0")
        self.height, self.width, self.channels, self.patch = int(height), int(width), int(channels), int(patch)
        self.levels, self.codebook_size = int(levels), int(codebook_size)
        self.keyframe_interval = max(1, int(keyframe_interval))
        self.text_vocab_size = int(text_vocab_size)
        self.latent_dim = patch * patch * channels
        self.patches_per_frame = (height // patch) * (width // patch)
        self.tokens_per_frame = self.patches_per_frame * self.levels
        rng = SeededRng(seed)
        n = levels * codebook_size * self.latent_dim
        shape = (levels, codebook_size, self.latent_dim)
        intra = ((rng.uniforms(n) - 0.5) * 0.1).astype(np.float32).reshape(shape)
        inter = ((rng.uniforms(n) - 0.5) * 0.1).astype(np.float32).reshape(shape)
        self.banks = [intra + np.float32(0.5), inter]

    # -- vocabulary -----------------------------------------------------------------------------
    @property
    def bos_video(self) -> int:
        return self.text_vocab_size

    @property
    def eos_video(self) -> int:
        return self.text_vocab_size + 1

    @property
    def frame_key(self) -> int:
        return self.text_vocab_size + 2

    @property
    def frame_delta(self) -> int:
        return self.text_vocab_size + 3

    @property
    def code_base(self) -> int:
        return self.text_vocab_size + 4

    @property
    def vocab_size(self) -> int:
        return self.code_base + 2 * self.levels * self.codebook_size

    def code_token(self, bank: int, level: int, code: int) -> int:
        return self.code_base + bank * self.levels * self.codebook_size + level * self.codebook_size + code

    def _is_code(self, tok: int) -> bool:
        return self.code_base <= tok < self.vocab_size

    # -- patches --------------------------------------------------------------------------------
    def _frame(self, f) -> np.ndarray:
        a = np.asarray(f, np.float32)
        if a.size != self.height * self.width * self.channels:
            raise ShapeError(f"VideoRVQCodec: frame has {a.size} values, expected "
                             f"{self.height * self.width * self.channels}")
        return a.reshape(self.height, self.width, self.channels)

    def _to_patches(self, frame: np.ndarray) -> np.ndarray:
        p = self.patch
        ph, pw = self.height // p, self.width // p
        return np.ascontiguousarray(frame.reshape(ph, p, pw, p, self.channels).transpose(0, 2, 1, 3, 4)
                                    .reshape(ph * pw, self.latent_dim))

    def _from_patches(self, patches: np.ndarray) -> np.ndarray:
        p = self.patch
        ph, pw = self.height // p, self.width // p
        f = patches.reshape(ph, pw, p, p, self.channels).transpose(0, 2, 1, 3, 4).reshape(
            self.height, self.width, self.channels)
        return np.clip(f, 0, 1).astype(np.float32)

    def _rvq(self, bank: int, v: np.ndarray):
        residual = v.astype(np.float32).copy()
        recon = np.zeros_like(residual)
        codes = []
        for level in range(self.levels):
            cb = self.banks[bank][level]
            idx = _nearest(cb, residual)
            codes.append(idx)
            recon = recon + cb[idx]
            residual = residual - cb[idx]
        return np.stack(codes, 1), recon

    # -- encode / decode ------------------------------------------------------------------------
    def encode(self, video) -> list[int]:
        """Token ids: <vid> (marker + patches*levels codes)* </vid>; key frames at t = 0 and t % kfi == 0."""
        frames = [self._frame(f) for f in video]
        out, prev = [self.bos_video], None
        for t, f in enumerate(frames):
            patches = self._to_patches(f)
            key = prev is None or t % self.keyframe_interval == 0
            bank = INTRA if key else INTER
            out.append(self.frame_key if key else self.frame_delta)
            codes, recon = self._rvq(bank, patches if key else patches - prev)
            out += [self.code_token(bank, lv, int(c)) for row in codes for lv, c in enumerate(row)]
            prev = recon if key else prev + recon
        out.append(self.eos_video)
        return out

    def decode(self, tokens) -> list[np.ndarray]:
        """Frames [H, W, C] from token ids: junk before the first frame marker is skipped (a </vid> there
        ends with no frames), missing codes count as zero, values are clamped to [0, 1]."""
        toks = [int(t) for t in tokens]
        frames, prev, i = [], None, 0
        markers = (self.frame_key, self.frame_delta)
        while i < len(toks) and toks[i] not in markers:
            if toks[i] == self.eos_video:
                return frames
            i += 1
        per_bank = self.levels * self.codebook_size
        while i < len(toks):
            marker = toks[i]
            if marker not in markers:
                break
            i += 1
            key = marker == self.frame_key or prev is None
            bank = INTRA if key else INTER
            codes = []
            while len(codes) < self.tokens_per_frame and i < len(toks) and self._is_code(toks[i]):
                codes.append(toks[i])
                i += 1
            recon = np.zeros((self.patches_per_frame, self.latent_dim), np.float32)
            for slot, tok in enumerate(codes):
                rem = (tok - self.code_base) % per_bank
                level, code = rem // self.codebook_size, rem % self.codebook_size
                recon[slot // self.levels] += self.banks[bank][level][code]
            prev = recon if key else prev + recon
            frames.append(self._from_patches(prev))
        return frames

    def generate_video(self, lm, max_new_tokens: int, prompt=None, **sampling) -> tuple[list[int], list[np.ndarray]]:
        """What a media LM (over this codec's vocabulary) generates after `prompt` (default <vid> <key>: a video
        opening on a key frame), stopping at </vid>, and the frames prompt + tokens decode to (decode's rules:
        missing codes count as zero). sampling: lm.generate's keywords (temperature, seed, top_k)."""
        prompt = [self.bos_video, self.frame_key] if prompt is None else [int(t) for t in prompt]
        if lm.config.vocab_size != self.vocab_size:
            raise ShapeError(f"the LM's vocabulary ({lm.config.vocab_size}) is not the codec's ({self.vocab_size})")
        toks = lm.generate(prompt, max_new_tokens, stop_token=self.eos_video, **sampling)
        return toks, self.decode(prompt + toks)

    # -- fit ------------------------------------------------------------------------------------
    def fit(self, videos, iterations: int = 8, seed: int = FIT_SEED) -> float:
        """Seeded k-means per residual level on key-frame patches (INTRA) and frame differences (INTER,
        against the previous original frame, as builderforce does); returns the reconstruction MSE."""
        rng = SeqRng(seed)
        intra, inter = [], []
        for video in videos:
            prev = None
            for t, f in enumerate(video):
                patches = self._to_patches(self._frame(f))
                if prev is None or t % self.keyframe_interval == 0:
                    intra.append(patches)
                else:
                    inter.append(patches - prev)
                prev = patches
        for bank, vecs in ((INTRA, intra), (INTER, inter)):
            if not vecs:
                continue
            res = np.concatenate(vecs).astype(np.float32)
            for level in range(self.levels):
                cent = _kmeans(res, self.codebook_size, iterations, rng)
                self.banks[bank][level] = cent
                res = res - cent[_nearest(cent, res)]
        se, n = 0.0, 0
        for video in videos:
            rec = self.decode(self.encode(video))
            for f, r in zip(video, rec):
                d = self._frame(f).astype(np.float64) - r.astype(np.float64)
                se += float((d * d).sum())
                n += d.size
        return se / n if n else 0.0

    # -- VRQ0 fields (bytes: evermind_vk.files.serialize_codec / deserialize_codec) ---------------------
    def header(self) -> dict:
        return {"height": self.height, "width": self.width, "channels": self.channels, "patch": self.patch,
                "levels": self.levels, "K": self.codebook_size, "keyframeInterval": self.keyframe_interval,
                "textVocabSize": self.text_vocab_size}

    @classmethod
    def from_parsed(cls, d: dict) -> "VideoRVQCodec":
        c = cls(d["height"], d["width"], d["channels"], d["patch"], d["levels"], d["K"], d["keyframeInterval"],
                d["textVocabSize"])
        c.banks = [np.asarray(d["intra"], np.float32).copy(), np.asarray(d["inter"], np.float32).copy()]
        return c
