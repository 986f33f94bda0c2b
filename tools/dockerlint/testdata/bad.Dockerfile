from golang:1.26-bookworm as Builder
MAINTAINER someone@example.com
ENV FOO bar
WORKDIR src
COPY secret.txt /app/
RUN echo $UNDEFINED_THING
EXPOSE 8080/TCP
CMD /app/server
