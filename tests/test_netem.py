import pytest

from commbench import netem


def test_rates_and_expected_goodput():
    assert netem.rate_bits_per_s("1gbit") == 1e9
    assert netem.rate_bits_per_s("2.5mbit") == 2.5e6
    assert netem.tcp_payload_per_packet(1500) == 1448
    assert netem.expected_goodput_bytes_per_s("1gbit", 1500) == pytest.approx(125e6 * 1448 / 1514)
    with pytest.raises(ValueError, match="not a tc rate"):
        netem.rate_bits_per_s("1 Gbps")


def test_namespace_commands_set_mtu_and_rate():
    argv = netem.wrap("mpiexec -n 2 k", {"rate": "100mbit", "mtu": 9000})
    assert argv[:2] == ["unshare", "--net"]
    script = argv[-1]
    assert "ip link set lo mtu 9000 up" in script and "tbf rate 100mbit" in script
    assert "burst 90000 " in script      # 1 ms at 100 Mbit/s is 12500 bytes, below 10 MTUs of 9000
    assert script.endswith("&& mpiexec -n 2 k")
