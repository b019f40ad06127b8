"""ConvAE: a small convolutional autoencoder for NCHW images (the image ops end to end).

    encoder  conv3x3(C -> w) GroupNorm SiLU; conv3x3 stride 2 (w -> 2w) GroupNorm SiLU;
             conv3x3 stride 2 (2w -> 2w) SiLU; conv1x1 (2w -> latent)              [latent, S/4, S/4]
    decoder  conv3x3(latent -> 2w) SiLU; upsample2d x2; conv3x3(2w -> w) GroupNorm SiLU;
             conv3x3(w -> 4C); pixel_shuffle x2                                    [C, S, S]

Trained with mean squared error. Parameters are f32, named PyTorch style ("enc.0.weight",
"enc.0.bias", "enc.1.weight" for a GroupNorm, ...)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..autodiff import functional as F
from ..errors import ShapeError
from ..runtime import Tensor, get_device, tensor
from .protocol import check_options, config_from_dict
from .weights import load_named


@dataclass(frozen=True)
class ConvAEConfig:
    image_size: int = 16
    channels: int = 3
    width: int = 16
    latent: int = 8
    groups: int = 4
    seed: int = 0

    def __post_init__(self):
        for name in ("image_size", "channels", "width", "latent", "groups"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"ConvAEConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.image_size % 4:
            raise ValueError(f"image_size {self.image_size} must be a multiple of 4 (two stride-2 convolutions)")
        if self.width % self.groups:
            raise ValueError(f"width {self.width} must be a multiple of groups {self.groups}")

    def to_dict(self) -> dict:
        """The fields by name (from_dict's input)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ConvAEConfig":
        """The config from to_dict()'s output."""
        return config_from_dict(cls, d)


# (name, in, out, kernel) of each convolution, and the GroupNorms (name, channels).
def _layers(c: ConvAEConfig):
    w, C, Z = c.width, c.channels, c.latent
    convs = [("enc.0", C, w, 3), ("enc.2", w, 2 * w, 3), ("enc.4", 2 * w, 2 * w, 3), ("enc.5", 2 * w, Z, 1),
             ("dec.0", Z, 2 * w, 3), ("dec.2", 2 * w, w, 3), ("dec.4", w, 4 * C, 3)]
    norms = [("enc.1", w), ("enc.3", 2 * w), ("dec.3", w)]
    return convs, norms


def init_params(cfg: ConvAEConfig) -> dict[str, np.ndarray]:
    """Seeded initial weights: PyTorch's conv default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and
    biases; GroupNorm weight 1, bias 0."""
    rng = np.random.default_rng(cfg.seed)
    convs, norms = _layers(cfg)
    p = {}
    for name, cin, cout, k in convs:
        bound = 1.0 / np.sqrt(cin * k * k)
        p[name + ".weight"] = rng.uniform(-bound, bound, (cout, cin, k, k)).astype(np.float32)
        p[name + ".bias"] = rng.uniform(-bound, bound, cout).astype(np.float32)
    for name, ch in norms:
        p[name + ".weight"] = np.ones(ch, np.float32)
        p[name + ".bias"] = np.zeros(ch, np.float32)
    return p


class ConvAE:
    """A small convolutional autoencoder (see the module docstring); implements models.protocol with
    image rows [N, C, S, S] and the mean squared reconstruction error."""

    data_kind = "images"
    eval_metric = "mse"
    precisions = ("f32",)
    loss_options = ()

    def __init__(self, config: ConvAEConfig | None = None, device=None, **kw):
        self.config = config or ConvAEConfig(**kw)
        self.device = get_device(device)
        self.params: dict[str, Tensor] = {k: tensor(v, device=self.device) for k, v in init_params(self.config).items()}

    def parameters(self) -> dict[str, Tensor]:
        return dict(self.params)

    def num_parameters(self) -> int:
        return sum(t.numel for t in self.params.values())

    def state_dict(self) -> dict[str, np.ndarray]:
        return {k: t.numpy() for k, t in self.params.items()}

    def load_state_dict(self, sd: dict) -> None:
        load_named(self.params, sd)

    def _conv(self, x, name, **kw):
        return F.conv2d(x, self.params[name + ".weight"], self.params[name + ".bias"], **kw)

    def _norm(self, x, name):
        return F.group_norm(x, self.config.groups, self.params[name + ".weight"], self.params[name + ".bias"])

    def encode(self, x: Tensor) -> Tensor:
        c = self.config
        if x.shape[1:] != (c.channels, c.image_size, c.image_size):
            raise ShapeError(f"ConvAE takes [N, {c.channels}, {c.image_size}, {c.image_size}] images, got {x.shape}")
        h = F.silu(self._norm(self._conv(x, "enc.0", padding=1), "enc.1"))
        h = F.silu(self._norm(self._conv(h, "enc.2", stride=2, padding=1), "enc.3"))
        h = F.silu(self._conv(h, "enc.4", stride=2, padding=1))
        return self._conv(h, "enc.5")

    def decode(self, z: Tensor) -> Tensor:
        h = F.silu(self._conv(z, "dec.0", padding=1))
        h = F.upsample2d(h, 2)
        h = F.silu(self._norm(self._conv(h, "dec.2", padding=1), "dec.3"))
        return F.pixel_shuffle(self._conv(h, "dec.4", padding=1), 2)

    def forward(self, x: Tensor) -> Tensor:
        """The reconstruction of a batch x [N, C, S, S]."""
        return self.decode(self.encode(x))

    def loss(self, x: Tensor) -> Tensor:
        """Mean squared reconstruction error (a 1-element f32 tensor)."""
        return F.mse_loss(self.forward(x), x)

    # -- the model protocol ---------------------------------------------------------------------
    def wsla_parameters(self) -> list[str]:
        """WSLA's narrow set: the GroupNorm gains and biases (how strongly each channel passes on)."""
        return [k for k in self.params if k.split(".")[0] + "." + k.split(".")[1] in
                {n for n, _ in _layers(self.config)[1]}]

    def batch_inputs(self, batch: int, seq_len: int = 0) -> dict:
        """images, f32 [batch, channels, image_size, image_size]."""
        c = self.config
        return {"images": ((batch, c.channels, c.image_size, c.image_size), "f32")}

    def batch_loss(self, inputs: dict, batch: int, seq_len: int = 0, dtype: str = "f32", grad_scale: float = 1.0,
                   **options) -> tuple:
        """(mean squared reconstruction error, no extras)."""
        check_options(self, options)
        return self.loss(inputs["images"]), {}

    def generation_state(self):
        """None: an autoencoder does not generate."""
        return None
