"""The same task returning its child's result, which the caller then owns: ray-lint reports nothing
here."""

import ray


@ray.remote
def tokenize(text: str) -> list[str]:
    return text.lower().split()


@ray.remote
def prepare(document: str) -> list[str]:
    cleaned = " ".join(document.split())
    return ray.get(tokenize.remote(cleaned))  # the nested-task pattern: the caller gets the value


if __name__ == "__main__":
    ray.init()
    print(ray.get([prepare.remote(doc) for doc in ["Hello  Ray", " Objects have owners "]]))
