"""Handles of registered hooks (torch.utils.hooks): tensor gradient hooks (ClTensor.register_hook)
and module hooks (nn.Module.register_forward_hook and the others)."""
import itertools

_ids = itertools.count()


class RemovableHandle:
    """What a register_*hook call returns: remove() takes the hook out again, as does leaving a
    `with handle:` block.

    Example:
        handle = model.fc.register_forward_hook(lambda m, args, out: print(out.shape))
        model(x)
        handle.remove()
    """

    def __init__(self, hooks, hook, prepend=False):
        self.id = next(_ids)
        self._hooks = hooks
        hooks[self.id] = hook
        if prepend:
            hooks.move_to_end(self.id, last=False)

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def __repr__(self):
        return f"<RemovableHandle id={self.id}>"
