"""The error of the OpenTelemetry extra, kept free of OpenTelemetry imports so that the package can
raise it before it touches OpenTelemetry at all."""

from __future__ import annotations

#: What to run when the optional dependencies are missing.
INSTALL_HINT = "pip install 'durableq[otel]'"


class OtelExtraMissing(ImportError):
    """opentelemetry-api or opentelemetry-instrumentation is not installed: ``durableq[otel]`` is needed."""

    def __init__(self, module: str) -> None:
        super().__init__(
            f"durableq.otel needs {module}, which is not installed; install the OpenTelemetry extra "
            f"with: {INSTALL_HINT}",
            name=module,
        )
