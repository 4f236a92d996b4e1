"""The shared foundation every layer above builds on.

- :mod:`.backend`: TensorLy backends per thread, conversions between them.
- :mod:`.validation`: checks at the boundary (data, parameters), before any state changes.
- :mod:`.dictionary`: the CP dictionary's algebra (Gram matrices, projections, MTTKRPs) without
  Khatri-Rao products.
- :mod:`.constraints`: projections and proximal operators of the constraint sets.
- :mod:`.atomic`: atomic file writes.
"""
