using System;
using Xunit;

namespace Pay
{
    public class Client
    {
        private int retries;

        public Client(int retries) { this.retries = retries; }

        public int Limit { get; set; }

        public int Charge(int a, int b) { return a + b; }

        public int Charge(string card) { return 0; }

        public struct Receipt { public int Id; }
    }

    public interface IClient
    {
        int Charge(int a, int b);
    }

    public enum State { Open, Closed }

    public class ClientTests
    {
        [Fact]
        public void Charges() { }

        [Fact(Skip = "slow")]
        public void ChargesLater() { }
    }
}
