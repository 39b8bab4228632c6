"""Nelder-Mead over a few parameters, asking for its points in batches so that they can run in
parallel.

Why not a coordinate search: the output-length model's numbers trade off (more sequences ending
early, or the same ones ending later, save the same KV cache), so the best fit lies along a
ridge that moves of one parameter at a time cannot follow. The simplex follows it. Each
iteration asks for the reflection and the expansion together (and both contractions together),
so two workers finish an iteration in about the time of one sim. Coordinates are the caller's:
scale them so that one unit is one sensible step of every parameter.
"""

from __future__ import annotations

from typing import Callable, Sequence

Point = tuple[float, ...]
Batch = Callable[[Sequence[Point]], list[float]]


def _towards(a: Point, b: Point, t: float) -> Point:
    """a + t * (b - a)."""
    return tuple(x + t * (y - x) for x, y in zip(a, b))


def minimize(evaluate: Batch, start: Point, max_evals: int, tol: float = 0.05,
             first: float | None = None) -> tuple[Point, float, int]:
    """(best point, its value, evaluations). The first simplex is `start` plus one unit along
    each axis; `first` is `start`'s value when the caller already has it. Stops after
    `max_evals` evaluations or when every vertex is within `tol` of the best."""
    n = len(start)
    vertices = [tuple(start)] + [tuple(x + (1.0 if i == j else 0.0) for j, x in enumerate(start))
                                 for i in range(n)]
    todo = vertices if first is None else vertices[1:]
    values = ([] if first is None else [first]) + evaluate(todo)
    evals = len(todo)
    while evals < max_evals:
        order = sorted(range(n + 1), key=lambda i: values[i])
        vertices = [vertices[i] for i in order]
        values = [values[i] for i in order]
        if max(max(abs(a - b) for a, b in zip(v, vertices[0])) for v in vertices[1:]) < tol:
            break
        centroid = tuple(sum(v[k] for v in vertices[:-1]) / n for k in range(n))
        worst = vertices[-1]
        reflected, expanded = _towards(centroid, worst, -1.0), _towards(centroid, worst, -2.0)
        r_value, e_value = evaluate([reflected, expanded])
        evals += 2
        if min(r_value, e_value) < values[0]:
            vertices[-1], values[-1] = ((expanded, e_value) if e_value < r_value
                                        else (reflected, r_value))
            continue
        if r_value < values[-2]:
            vertices[-1], values[-1] = reflected, r_value
            continue
        outside, inside = _towards(centroid, worst, -0.5), _towards(centroid, worst, 0.5)
        o_value, i_value = evaluate([outside, inside])
        evals += 2
        best_c, best_cv = (outside, o_value) if o_value < i_value else (inside, i_value)
        if best_cv < min(values[-1], r_value):
            vertices[-1], values[-1] = best_c, best_cv
            continue
        # shrink towards the best vertex
        vertices = [vertices[0]] + [_towards(vertices[0], v, 0.5) for v in vertices[1:]]
        values = [values[0]] + evaluate(vertices[1:])
        evals += n
    i = min(range(n + 1), key=lambda k: values[k])
    return vertices[i], values[i], evals
