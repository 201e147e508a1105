"""Ray code whose task returns the ref of a child task it submitted: `ray-lint check examples/` reports
the RAY034 below, and `ray-lint verify examples/return_child_task_ref.py` runs the rule's model of it
and shows the child's result lost with the parent's worker."""

import ray


@ray.remote
def tokenize(text: str) -> list[str]:
    return text.lower().split()


@ray.remote
def prepare(document: str):
    cleaned = " ".join(document.split())
    return tokenize.remote(cleaned)  # RAY034: this task's worker owns the tokens; if it dies, they are lost


if __name__ == "__main__":
    ray.init()
    token_refs = ray.get([prepare.remote(doc) for doc in ["Hello  Ray", " Objects have owners "]])
    print(ray.get(token_refs))  # a second get, and it works only while each parent's worker lives
