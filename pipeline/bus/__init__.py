"""Hand-offs between hosts over NATS JetStream (the optional ``bus`` extra: ``pip install 'batonpass[bus]'``).

Imported only when a route crosses hosts: a single-machine setup never loads the NATS client.
"""
