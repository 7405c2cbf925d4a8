"""torch.einsum to Ember ops. torch.export decomposes einsum into permutes and bmm itself;
TorchScript traces record aten::einsum whole, so a traced model reaches this converter.

Operands are contracted left to right, two at a time. For a pair, every letter is one of:
batch (in both operands and kept), contracted (in both, not kept after this pair), or free
(in one operand only, kept); a letter in one operand only and needed nowhere later is summed
out first. Each operand is permuted to [batch, free, contracted] (the right one to [batch,
contracted, free]) and flattened to 3-D, so the pair is one batched matmul; the result is
unflattened and finally permuted to the output's order. An ellipsis stands for the same
broadcast dimensions in every operand. A letter repeated within one operand (a diagonal) is
refused. Registered into _aten_registry.CONVERTERS on import."""
import string

from .._ember import EmberError
from ._aten_registry import broadcast_to, converts, matmul, reshape, transpose


def _parse(equation, operands):
    """Each operand's letters (an ellipsis as upper-case letters, the broadcast dimensions
    right-aligned as torch aligns them) and the output's letters."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise EmberError(f"einsum '{equation}': {len(terms)} operand terms for "
                         f"{len(operands)} tensors")
    ellipsis_dims = max((len(t.shape) - len(term.replace("...", ""))
                         for term, t in zip(terms, operands) if "..." in term), default=0)
    spare = [c for c in string.ascii_uppercase if c not in equation][:ellipsis_dims]
    letters = []
    for term, t in zip(terms, operands):
        if "..." in term:
            own = len(t.shape) - len(term.replace("...", ""))
            term = term.replace("...", "".join(spare[ellipsis_dims - own:]))
        if len(term) != len(t.shape) or not term.isalpha():
            raise EmberError(f"einsum '{equation}': the term '{term}' does not match an "
                             f"operand of shape {list(t.shape)}")
        if len(set(term)) != len(term):
            raise EmberError(f"einsum '{equation}': a repeated index within one operand "
                             "(a diagonal) is not supported; use torch.diagonal first")
        letters.append(term)
    if arrow:
        output = output.replace("...", "".join(spare))
    else:  # implicit: the ellipsis, then the letters used once, in alphabetical order
        counts = {c: "".join(letters).count(c) for c in "".join(letters)}
        output = "".join(spare) + "".join(sorted(c for c, n in counts.items()
                                                 if n == 1 and c not in spare))
    return letters, output


def _sum_out(cx, x, term, keep):
    """x without the letters of `term` that are not in `keep` (summed over)."""
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    x = cx.emit("sum", [x], axis=axes, keepdims=0)
    return x, "".join(c for c in term if c in keep)


def _contract(cx, a, ta, b, tb, keep, sizes):
    """The contraction of a (letters ta) and b (tb), keeping the letters in `keep`."""
    a, ta = _sum_out(cx, a, ta, keep + tb)
    b, tb = _sum_out(cx, b, tb, keep + ta)
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]

    def arrange(x, term, order):
        x = transpose(cx, x, [term.index(c) for c in order])
        return broadcast_to(cx, x, [sizes[c] for c in order])  # batch dims of size 1

    def count(group):
        n = 1
        for c in group:
            n *= sizes[c]
        return n

    a = reshape(cx, arrange(a, ta, batch + free_a + summed),
                [count(batch), count(free_a), count(summed)])
    b = reshape(cx, arrange(b, tb, batch + summed + free_b),
                [count(batch), count(summed), count(free_b)])
    out = reshape(cx, matmul(cx, a, b), [sizes[c] for c in batch + free_a + free_b])
    return out, "".join(batch + free_a + free_b)


@converts("einsum")
def _einsum(cx, a):
    equation, operands = a[0], list(a[1])
    letters, output = _parse(equation, operands)
    sizes = {}
    for term, t in zip(letters, operands):
        for c, n in zip(term, t.shape):
            if sizes.get(c, 1) not in (1, n) and n != 1:
                raise EmberError(f"einsum '{equation}': index '{c}' has sizes {sizes[c]} "
                                 f"and {n}")
            sizes[c] = max(sizes.get(c, 1), n)
    x, term = operands[0], letters[0]
    for k in range(1, len(operands)):
        later = output + "".join(letters[k + 1:])
        x, term = _contract(cx, x, term, operands[k], letters[k], later, sizes)
    x, term = _sum_out(cx, x, term, output)
    if len(operands) == 1:
        x = broadcast_to(cx, x, [sizes[c] for c in term])
    return transpose(cx, x, [term.index(c) for c in output])
