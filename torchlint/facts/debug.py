"""`torchlint debug facts FILE`: what the semantic model knows, with lines — the first tool for triage."""

from __future__ import annotations

from torchlint.facts import EvidenceKind, ModuleFacts


def describe(facts: ModuleFacts) -> str:
    out: list[str] = [f"{facts.path}"]

    def line(node) -> int:
        return facts.lines.position(facts.span(node)[0]).line

    device = facts.device
    where = f" (line {line(device.node)}: {device.reason})" if device.node is not None else ""
    out.append(f"device: {device.device.label}{where}")
    out.append(f"__main__ guard: {'yes' if facts.has_main_guard else 'no'}")
    if facts.frameworks:
        out.append(f"frameworks: {', '.join(sorted(facts.frameworks))}")
    out.append("training loops:")
    for loop in facts.training_loops:
        function = loop.function.name if loop.function else "<module>"
        epoch = ", inside an epoch loop" if loop.parent is not None else ""
        out.append(f"  line {line(loop.node)} in {function}{epoch}")
        for move in facts.batch_moves(loop):
            blocking = move.non_blocking.describe() if move.non_blocking else "not passed"
            out.append(
                f"    line {line(move.call)}: batch moved to {move.device.label}, non_blocking {blocking}"
            )
    if not facts.training_loops:
        out.append("  (none)")
    out.append("loaders:")
    for loader in facts.loaders:
        out.append(
            f"  line {line(loader.call)}: {loader.cls}{'' if loader.complete else ' (options incomplete)'}"
        )
        for name, option in sorted(loader.options.items()):
            out.append(f"    {name} = {option.describe()}")
        out.append(f"    dataset kind: {facts.dataset_kind(loader).value}")
        for problem in facts.unpicklable(loader):
            out.append(f"    does not pickle: {problem.what} is {problem.why}")
        uses = facts.loader_uses(loader)
        for use in uses:
            per_epoch = "every epoch" if use.per_epoch else "once"
            out.append(f"    feeds training via {use.how} in {use.path}, iterated {per_epoch}")
        if not uses:
            out.append("    feeds no training loop")
    if not facts.loaders:
        out.append("  (none)")
    out.append("precision:")
    for site in facts.autocast_sites:
        dtype = site.dtype + ("" if site.dtype_explicit else " (the device's default)")
        out.append(
            f"  line {line(site.node)}: autocast ({site.how}), device {site.device}, dtype {dtype}, "
            f"enabled {site.enabled}"
        )
    for site, _ in facts.autocast_regions:
        if site.call is None and site.how.startswith("parameter"):  # the others are listed above
            out.append(
                f"  line {line(site.node)}: autocast region ({site.how}), device {site.device}, dtype "
                f"{site.dtype}, enabled {site.enabled}"
            )
    for scaler in facts.grad_scalers:
        held = f" as `{scaler.name}`" if scaler.name else ""
        uses = ", ".join(f"{method} x{len(calls)}" for method, calls in sorted(scaler.uses.items()))
        out.append(
            f"  line {line(scaler.node)}: scaler {scaler.how}{held}, enabled {scaler.enabled}; "
            f"used: {uses or 'never'}"
        )
    for switch in facts.precision_switches:
        out.append(f"  line {line(switch.node)}: {switch.what}")
    flags = [(e.node, e.what) for e in facts.precision_evidence if e.kind is EvidenceKind.FLAG]
    if flags:
        shown = ", ".join(f"{what} (line {line(node)})" for node, what in flags[:5])
        more = f" and {len(flags) - 5} more" if len(flags) > 5 else ""
        out.append(f"  flags: {shown}{more}")
    if not facts.precision_evidence:
        out.append("  (none)")
    for loop in facts.training_loops:
        device = facts.loop_device(loop)
        if device is not facts.device.device:
            said = f"trains on {device.label}, as the files calling it say"
            out.append(f"  loop at line {line(loop.node)}: {said}")
        step = facts.training_step(loop)
        if step is None:
            continue
        region = f"lines {line(step.region[0])}-{line(step.region[-1])}" if step.region else step.why_not
        out.append(
            f"  loop at line {line(loop.node)}: forward `{facts.code(step.callee)}` at line "
            f"{line(step.forward)}; forward and loss: {region}"
        )
    out.append("stacks:")
    for stack in facts.stacks:
        block = f"`{stack.block}`" if stack.block else "clones"
        depth = stack.depth
        count = str(depth.value) if depth.value is not None and not depth.configurable else depth.how
        out.append(
            f"  line {line(stack.node)}: `{stack.cls.name}.{stack.attribute}` {stack.container} of {block} "
            f"x {count}, built by {stack.how} in `{stack.method.name}`"
        )
        for application in stack.applications:
            shape = (
                f"`{facts.code(application.statement).strip()}`" if application.statement else "not fixable"
            )
            out.append(f"    line {line(application.node)}: applied by {application.how} ({shape})")
        if not stack.applications:
            out.append("    not applied by forward")
        trainers, checkpointed = facts.stack_status(stack)
        trained = f"trained in {', '.join(trainers)}" if trainers is not None else "not known to be trained"
        out.append(f"    {trained}; checkpointed: {checkpointed or 'no'}")
    if not facts.stacks:
        out.append("  (none)")
    evidence = facts.checkpointing_evidence
    if evidence:
        out.append("checkpointing:")
        for node, what in evidence:
            out.append(f"  line {line(node)}: {what}")
    out.append("trained models:")
    for model in facts.trained_models:
        out.append(f"  `{model.text}` trained by {model.how} (line {line(model.trained_at)})")
        for event in sorted(model.events, key=lambda event: event.offset):
            text = facts.code(event.node).splitlines()[0]
            flags = "".join(
                (", conditional" if event.conditional else "", ", in a loop" if event.in_loop else "")
            )
            out.append(f"    line {line(event.node)}: {event.kind} `{text}`{flags}")
        compiled = "yes" if facts.compiled_somewhere(model) else "no"
        kind = ", an nn.Sequential" if facts.is_sequential(model.expr, model.scope) else ""
        out.append(f"    compiled: {compiled}; device: {facts.model_device(model).label}{kind}")
    if not facts.trained_models:
        out.append("  (none)")
    out.append("compile sites:")
    for site in facts.compile_sites:
        every = ", every training step" if facts.runs_every_step(site) else ""
        what = f" of `{facts.code(site.compiled)}`" if site.compiled is not None else ""
        out.append(f"  line {line(site.node)}: {site.how}{what}{every}")
    if not facts.compile_sites:
        out.append("  (none)")
    for arguments in facts.hf_training_arguments:
        out.append(f"TrainingArguments at line {line(arguments.call)}:")
        for name, option in sorted(arguments.options.items()):
            if name.startswith("dataloader_"):
                out.append(f"    {name} = {option.describe()}")
    return "\n".join(out) + "\n"
