"""Framework adapters, one module each, found by ``registry`` (a module exposing ``ADAPTER``)."""
