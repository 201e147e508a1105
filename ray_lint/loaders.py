"""Calls that load something big into the calling process: whole files read into memory, and models.

Several rules ask whether a task, an actor or a Ray Data UDF does such a load: to size its memory
(RAY045, RAY106) or to do it once rather than per batch (RAY102). The tables are qualified names, as
`model.call_name` resolves them through imports and aliases. (`ray_lint.sizes.DATA_LOADERS` is the
narrower list of loaders whose *result* counts as a large object to pass around.)"""

from __future__ import annotations

# Calls that read a whole file, or a pickled model, into the heap.
FILE_LOADERS = frozenset({
    "pandas.read_csv", "pandas.read_parquet", "pandas.read_json", "pandas.read_excel", "pandas.read_feather",
    "pandas.read_pickle", "pandas.read_hdf", "pandas.read_table", "pandas.read_orc",
    "polars.read_csv", "polars.read_parquet", "polars.read_json", "polars.read_ipc",
    "pyarrow.parquet.read_table", "pyarrow.csv.read_csv", "pyarrow.feather.read_table",
    "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile",
    "torch.load", "pickle.load", "joblib.load", "cloudpickle.load",
    "tensorflow.keras.models.load_model", "keras.models.load_model",
})
# Calls that build a model (or an inference session around one): weights loaded into the heap.
MODEL_LOADERS = frozenset({
    "transformers.pipeline", "onnxruntime.InferenceSession", "tensorflow.keras.models.load_model",
    "keras.models.load_model", "keras.saving.load_model", "torch.hub.load", "torch.jit.load",
    "sentence_transformers.SentenceTransformer", "spacy.load", "whisper.load_model", "vllm.LLM", "ultralytics.YOLO",
    "open_clip.create_model_and_transforms", "mlflow.pyfunc.load_model", "mlflow.pytorch.load_model",
    "mlflow.sklearn.load_model", "lightgbm.Booster", "xgboost.Booster", "gensim.models.KeyedVectors.load",
})
# Methods that load a pretrained model whatever class they are called on (transformers, diffusers,
# sentence-transformers, tokenizers).
MODEL_LOADER_METHODS = frozenset({"from_pretrained"})
