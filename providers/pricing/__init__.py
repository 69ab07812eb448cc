"""Price fetchers: each cloud's price APIs read into a catalog with provenance (``gpuplan catalog fetch``).

``aws`` (Price List, Savings Plans rates, spot price history, instance shapes), ``gcp`` (Cloud Billing
Catalog SKUs assembled into machine prices, machine and accelerator types), ``azure`` (Retail Prices API).
Each returns a :class:`providers.pricing.common.FetchResult`; each SDK is imported only when its fetcher
runs, as the provider adapters do. Only the CLI and operations call these (the ``clouds`` contract).
"""
