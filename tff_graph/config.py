"""One configuration tree for an experiment; flags, `config.json` and parameter counts derive from it.

    ExperimentConfig
      algorithm, proximal_mu          which algorithm (a registered name) and its FedProx mu
      data: DataConfig                setting, split kind and seed, node features, structure-embedding widths
      model: ModelConfig              hidden width, layers, dropout, structure embedding type, backbones
      training: TrainingConfig        local epochs, batch size, Adam, weight decay (client_work)
      clustering: ClusteringConfig    GCFL's eps1, eps2, seq_length, standardize (None: the setting's)
      run: RunConfig                  rounds, seeds, client fraction, evaluation/checkpoint periods
      privacy: PrivacyConfig          DP noise/clip/delta and secure aggregation of the shared update

Every leaf field is one program flag of the same name (`programs/common.py` defines the flags from
the dataclasses' fields and their `help` metadata; fields with `flag=False` are not flags).
`config.json` is `ExperimentConfig.to_json()`; `ExperimentConfig.from_dict` also reads the flat
`config.json` of runs made before the tree existed.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from data_prep import structure
from tff_graph import clustering
from tff_graph import privacy
from tff_graph.federated import client_work as cw
from tff_graph.models import classifiers
from tff_graph.models import layers


MAX_N_RW = 256  # Random-walk steps: the papers use 16; thousands only burn time and memory.
MAX_N_DG = 1024


def _field(default, help_text: str, **extra):
  return dataclasses.field(default=default, metadata={"help": help_text, **extra})


@dataclasses.dataclass(frozen=True)
class DataConfig:
  setting: str = _field("chem", "Clients: a group (molecules, small, biochem, mix of GCFL; chem, biochem, biochemsn, "
                        "biosncv of FedStar), optionally with _tiny (150 graphs per dataset) and/or @k (k clients per "
                        "dataset, e.g. chem@4); or a comma list of parts NAME[@k] | NAME:N[:overlap] | "
                        "NAME:N:dirichlet=ALPHA, where NAME is any TU dataset in --data_dir (or a group), e.g. "
                        "MUTAG,PTC_MR,NCI1@4 or NCI1:30:dirichlet=0.5.")
  split: str = _field("reference", "How each client's graphs are split 80/10/10: reference (the papers' scikit-learn "
                      "calls, random_state=split_seed: the same graphs in train/val/test as the papers' code) or "
                      "numpy (tff-graph's earlier split, kept for the tables made with it).",
                      choices=("reference", "numpy"))
  split_seed: int = _field(123, "Seed of the client partition (the papers' seed_dataSplit = 123).", lower_bound=0,
                           upper_bound=2**32 - 1)
  node_features: str = _field("auto", "Node features: auto (the papers' rule: one-hot node labels, else attributes, "
                              "else one-hot degree), labels, attributes, both (labels and attributes concatenated) "
                              "or degree.", choices=("auto", "labels", "attributes", "both", "degree"))
  standardize_attributes: bool = _field(False, "Standardise node-attribute columns per client with the mean/std of "
                                        "its training graphs (nothing from val/test).")
  n_rw: int = _field(16, "Random-walk steps of the RWSE (1..256).", lower_bound=1, upper_bound=MAX_N_RW)
  n_dg: int = _field(16, "Width of the one-hot degree embedding (1..1024).", lower_bound=1, upper_bound=MAX_N_DG)
  n_lap: int = _field(8, "Laplacian eigenvectors of the lap embeddings (1..64; computed only for them).",
                      lower_bound=1, upper_bound=64)
  n_spd: int = _field(8, "Distances of the spd embeddings' histogram (1..64; computed only for them).",
                      lower_bound=1, upper_bound=64)

  def __post_init__(self):
    if self.split not in ("reference", "numpy"):
      raise ValueError(f"split must be 'reference' or 'numpy', got {self.split!r}")
    if not 0 <= self.split_seed < 2**32:
      raise ValueError(f"split_seed must be in 0..2**32-1, got {self.split_seed}")
    if self.node_features not in ("auto", "labels", "attributes", "both", "degree"):
      raise ValueError(f"unknown node_features {self.node_features!r}")
    if not (1 <= self.n_rw <= MAX_N_RW and 1 <= self.n_dg <= MAX_N_DG):
      raise ValueError(f"n_rw must be in 1..{MAX_N_RW} and n_dg in 1..{MAX_N_DG}, got {self.n_rw}, {self.n_dg}")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  hidden: int = _field(64, "Hidden width of every layer.", lower_bound=1)
  num_layers: int = _field(3, "Graph convolutions per encoder.", lower_bound=1)
  dropout: float = _field(0.5, "Dropout rate.", lower_bound=0.0, upper_bound=0.99)
  embedding_type: str = _field("rw_dg", "FedStar structure embedding: random-walk (rw), degree (dg), both (rw_dg), "
                               "all-ones (ones), Laplacian-eigenvector PE (lap, random sign flips in training), "
                               "shortest-path-distance histogram (spd), or rw_dg followed by either (rw_dg_lap, "
                               "rw_dg_spd).",
                               choices=("rw", "dg", "rw_dg", "ones", "lap", "spd", "rw_dg_lap", "rw_dg_spd"))
  backbone: str | None = _field(None, "Graph convolution of the GIN-family model and of FedStar's feature encoder: "
                                "gin, gcn, sage or one registered with tff_graph.register_convolution (default: the "
                                "algorithm's own: sage for fedsage, gin for the others).")
  structure_backbone: str = _field("gcn", "Graph convolution of FedStar's structure encoder (gcn in the paper; gin, "
                                   "sage or a registered one). Read by the structure-encoder models only.")

  def __post_init__(self):
    for name in ("backbone", "structure_backbone"):
      value = getattr(self, name)
      if value is not None and value not in layers.CONVOLUTIONS:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(layers.CONVOLUTIONS)} "
                         "(or register yours with tff_graph.register_convolution)")


@dataclasses.dataclass(frozen=True)
class ClusteringConfig:
  eps1: float | None = _field(None, "GCFL: split a cluster when its mean update norm < eps1 (default: the "
                              "reference's value for the setting).", lower_bound=0.0)
  eps2: float | None = _field(None, "GCFL: ... and its largest client update norm > eps2 (default: reference).",
                              lower_bound=0.0)
  seq_length: int | None = _field(None, "GCFL+: length of the norm sequences compared by DTW (default: reference).",
                                  lower_bound=1)
  standardize: bool = _field(False, "GCFL+: divide each sequence by its std before DTW.")
  warmup_rounds: int = _field(clustering.WARMUP_ROUNDS, "GCFL: no cluster splits in the first k rounds "
                              "(the reference's 20).", lower_bound=0)

  def __post_init__(self):
    for name in ("eps1", "eps2"):
      value = getattr(self, name)
      if value is not None and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    if self.seq_length is not None and self.seq_length < 1:
      raise ValueError(f"seq_length must be >= 1, got {self.seq_length}")
    if self.warmup_rounds < 0:
      raise ValueError(f"warmup_rounds must be >= 0, got {self.warmup_rounds}")

  def thresholds(self, setting: str) -> clustering.SplitThresholds:
    base = clustering.thresholds_for(setting)
    return dataclasses.replace(
        base, eps1=base.eps1 if self.eps1 is None else self.eps1,
        eps2=base.eps2 if self.eps2 is None else self.eps2,
        seq_length=base.seq_length if self.seq_length is None else self.seq_length, standardize=self.standardize,
        warmup_rounds=self.warmup_rounds)


@dataclasses.dataclass(frozen=True)
class RunConfig:
  rounds: int = _field(200, "Communication rounds.", lower_bound=1)
  seeds: tuple[int, ...] = _field((1, 2, 3, 4, 5), "Model seeds, comma separated (the papers use 1,2,3,4,5 and "
                                  "10,42,79,111,123); each seed is one run on the same client splits.")
  client_fraction: float = _field(1.0, "Share of clients sampled each round.", lower_bound=0.0, upper_bound=1.0)
  eval_every: int = _field(1, "Evaluate val/test every k rounds (and after the last).", lower_bound=1)
  checkpoint_every: int = _field(10, "Checkpoint every k rounds.", lower_bound=1)
  client_states: str = _field("worker", "Where the clients' private state (private weights, Adam moments, dropout "
                              "generators) lives between rounds: worker (files in <run folder>/seed_<s>/client_states "
                              "on the machine that runs the client; only references travel; remote workers must see "
                              "that path) or driver (sent to the worker and back with every call). Same results bit "
                              "for bit; a resumed seed keeps the place its checkpoints used.",
                              choices=("driver", "worker"))

  def __post_init__(self):
    if self.rounds < 1:
      raise ValueError(f"rounds must be >= 1, got {self.rounds}")
    if not self.seeds:
      raise ValueError("at least one seed is needed")
    if len(set(self.seeds)) != len(self.seeds):
      raise ValueError(f"seeds must differ (each is one run), got {list(self.seeds)}")
    if any(s < 0 or s >= 2**31 for s in self.seeds):
      raise ValueError(f"seeds must be in 0..2**31-1, got {list(self.seeds)}")
    if self.checkpoint_every < 1 or self.eval_every < 1:
      raise ValueError(f"checkpoint_every and eval_every must be >= 1 ({self})")
    if not 0.0 < self.client_fraction <= 1.0:
      raise ValueError(f"client_fraction must be in (0, 1], got {self.client_fraction}")
    if self.client_states not in ("driver", "worker"):
      raise ValueError(f"client_states must be 'driver' or 'worker', got {self.client_states!r}")


@dataclasses.dataclass(frozen=True)
class PrivacyConfig:
  dp_noise_multiplier: float | None = _field(None, "Client-level DP on the shared update: Gaussian noise of stddev "
                                             "dp_noise_multiplier * dp_clip on the sum of clipped updates (unweighted "
                                             "mean); epsilon per round in train_metrics.csv (default: no DP).",
                                             lower_bound=0.0)
  dp_clip: float = _field(1.0, "DP: L2 clip norm of each client's shared update.", lower_bound=0.0)
  dp_delta: float = _field(1e-5, "DP: the delta at which epsilon is reported.", lower_bound=0.0, upper_bound=1.0)
  secure_aggregation: bool = _field(False, "Sum the shared updates with TFF's SecureSumFactory (values clipped to "
                                    "+-secure_bound, quantised to 32-bit integers; simulated here).")
  secure_bound: float = _field(1000.0, "Secure aggregation: clipping bound of each summed value.", lower_bound=0.0)

  def __post_init__(self):
    z = self.dp_noise_multiplier
    if z is not None and not (math.isfinite(z) and z >= 0):
      raise ValueError(f"dp_noise_multiplier must be a finite number >= 0, got {z}")
    if not (math.isfinite(self.dp_clip) and self.dp_clip > 0):
      raise ValueError(f"dp_clip must be a finite number > 0, got {self.dp_clip}")
    if not 0 < self.dp_delta < 1:
      raise ValueError(f"dp_delta must be in (0, 1), got {self.dp_delta}")
    if not (math.isfinite(self.secure_bound) and self.secure_bound > 0):
      raise ValueError(f"secure_bound must be a finite number > 0, got {self.secure_bound}")

  @property
  def active(self) -> bool:
    return self.dp_noise_multiplier is not None or self.secure_aggregation

  def spec(self) -> privacy.PrivacySpec:
    return privacy.PrivacySpec(noise_multiplier=self.dp_noise_multiplier, clip=self.dp_clip, delta=self.dp_delta,
                               secure=self.secure_aggregation, secure_bound=self.secure_bound)


# TrainingConfig (client_work) is the training branch; these fields of it are flags:
TRAINING_FLAGS = {
    "local_epochs": ("Local epochs per round.", dict(lower_bound=1)),
    "batch_size": ("Graphs per local batch.", dict(lower_bound=1)),
    "learning_rate": ("Adam learning rate.", dict(lower_bound=0.0)),
    "weight_decay": ("L2 weight decay added to the gradient (PyTorch Adam).", dict(lower_bound=0.0)),
}

_LEGACY_SECTIONS = {"data": DataConfig, "model": ModelConfig, "clustering": ClusteringConfig, "run": RunConfig,
                    "privacy": PrivacyConfig,
                    "training": cw.TrainingConfig}


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
  """Everything that defines a run (saved as config.json); see module docstring."""

  algorithm: str
  data: DataConfig = DataConfig()
  model: ModelConfig = ModelConfig()
  training: cw.TrainingConfig = cw.TrainingConfig()
  clustering: ClusteringConfig = ClusteringConfig()
  run: RunConfig = RunConfig()
  privacy: PrivacyConfig = PrivacyConfig()
  proximal_mu: float | None = _field(None, "FedProx mu (default: 0.01 for fedprox, 0 otherwise).")

  def __post_init__(self):
    if self.proximal_mu is not None and self.proximal_mu < 0:
      raise ValueError(f"proximal_mu must be >= 0, got {self.proximal_mu}")
    if self.training.proximal_mu != 0.0:
      raise ValueError("set the proximal term with ExperimentConfig.proximal_mu, not training.proximal_mu")

  @property
  def setting(self) -> str:
    return self.data.setting

  @property
  def seeds(self) -> tuple[int, ...]:
    return self.run.seeds

  @property
  def rounds(self) -> int:
    return self.run.rounds

  def thresholds(self) -> clustering.SplitThresholds:
    return self.clustering.thresholds(self.data.setting)

  def extra_embeddings(self) -> dict[str, int]:
    """{"n_lap": k, "n_spd": s}: the widths of the optional stored embeddings the model reads (0: none)."""
    parts = structure.EmbeddingType(self.model.embedding_type).parts
    return {"n_lap": self.data.n_lap if "lap" in parts else 0, "n_spd": self.data.n_spd if "spd" in parts else 0}

  def model_spec(self, kind: str, backbone: str, *, feature_dim: int, num_classes: int) -> classifiers.ModelSpec:
    """The (padded) model of a setting whose widest client has these widths; `backbone` is the
    algorithm's convolution, replaced by `model.backbone` when that is set."""
    m = self.model
    return classifiers.ModelSpec(kind=kind, feature_dim=feature_dim, num_classes=num_classes, hidden=m.hidden,
                                 num_layers=m.num_layers, dropout=m.dropout, backbone=m.backbone or backbone,
                                 structure_backbone=m.structure_backbone,
                                 embedding_type=m.embedding_type, n_rw=self.data.n_rw, n_dg=self.data.n_dg,
                                 **(self.extra_embeddings() if kind == classifiers.DECOUPLED_MODEL else {}))

  def to_dict(self) -> dict[str, Any]:
    d = dataclasses.asdict(self)
    d["run"]["seeds"] = list(self.run.seeds)
    return d

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=1, sort_keys=True)

  def replace_seeds(self, seeds) -> "ExperimentConfig":
    return dataclasses.replace(self, run=dataclasses.replace(self.run, seeds=tuple(seeds)))

  @classmethod
  def from_dict(cls, d: dict[str, Any]) -> "ExperimentConfig":
    """From `to_dict()` output, or from the flat config.json of earlier versions."""
    d = dict(d)
    if "data" not in d:  # Flat (before the tree): distribute the keys over the sections.
      flat, d = d, {"algorithm": d.pop("algorithm"), "proximal_mu": d.pop("proximal_mu", None)}
      for name, section in _LEGACY_SECTIONS.items():
        fields = {f.name for f in dataclasses.fields(section)}
        d[name] = {k: flat.pop(k) for k in list(flat) if k in fields}
      if flat:
        raise ValueError(f"unknown configuration keys {sorted(flat)}")
    if "split" not in d.get("data", {}):  # Runs made before the reference split were on the NumPy split.
      d["data"] = {**d.get("data", {}), "split": "numpy"}
    sections = {}
    for name, section in _LEGACY_SECTIONS.items():
      values = dict(d.get(name, {}))
      if name == "run" and "seeds" in values:
        values["seeds"] = tuple(values["seeds"])
      sections[name] = section(**values)
    return cls(algorithm=d["algorithm"], proximal_mu=d.get("proximal_mu"), **sections)
