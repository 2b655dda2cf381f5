"""SASL on the broker, as Kafka's ``SaslServerAuthenticator``: one module per mechanism and
the per-connection exchange.

* :mod:`.mechanism`: what every server mechanism answers (:class:`ServerMechanism`), and
  :class:`AuthenticationFailed`, whose message goes to the client.
* :mod:`.plain` (PLAIN), :mod:`.scram` (SCRAM-SHA-256/512 with ``scramp``),
  :mod:`.oauthbearer` (OAUTHBEARER: JWTs checked with PyJWT).
* :mod:`.exchange`: one connection's SaslHandshake / SaslAuthenticate exchange, including
  KIP-368 re-authentication; pure (the caller passes ``now``), the broker's connection
  drives it.
* :mod:`.client`: the client side of each mechanism, for samsa's own clients.
"""
